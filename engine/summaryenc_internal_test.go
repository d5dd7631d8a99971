package engine

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAppendSummary: a summary is written as encoding/json writes it
// (without HTML's escapes, as all the gateway's JSON), so any reader (an
// older gateway's, encoding/json's) reads it the same, and a time Marshal
// refuses is refused.
func TestAppendSummary(t *testing.T) {
	at := time.Date(2026, 12, 4, 13, 5, 7, 123456789, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	for _, sum := range []Summary{
		{},
		{ID: "s1", Created: at, Updated: at},
		{ID: "s2", Owner: "b1", Title: "What's the weather in Tokyo?", Created: at, Updated: at.Add(time.Minute), Busy: true},
		{ID: "s3", Owner: "b1", Title: `<b>"quotes" & \back\slashes</b>`, Created: at.In(tokyo), Updated: at.Truncate(time.Second), Ended: true},
		{ID: "s4", Title: "tab\there, line\nbreak, \u2028 \u2029 \x01 and bad \xff UTF-8 ✓", Created: at, Updated: at, Ended: true, Busy: true},
	} {
		want, err := marshalNoHTML(sum)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := AppendSummary(nil, sum); err != nil || string(got) != string(want) {
			t.Errorf("AppendSummary(%+v) =\n %s, %v\nwant\n %s", sum, got, err, want)
		}
	}
	far := Summary{ID: "s5", Created: at, Updated: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(far); err == nil {
		t.Fatal("encoding/json writes a year past 9999 now: pick another refused time")
	}
	if got, err := AppendSummary(nil, far); err == nil {
		t.Errorf("AppendSummary of a year past 9999 = %s, want Marshal's error", got)
	}
}

func FuzzAppendSummary(f *testing.F) {
	f.Add("s1", "b1", "hello <world> & \"you\"", int64(1764850000123456789), false, true)
	f.Fuzz(func(t *testing.T, id, owner, title string, nanos int64, ended, busy bool) {
		at := time.Unix(0, nanos).UTC()
		sum := Summary{ID: id, Owner: owner, Title: title, Created: at, Updated: at, Ended: ended, Busy: busy}
		want, wantErr := marshalNoHTML(sum)
		got, err := AppendSummary(nil, sum)
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Errorf("AppendSummary =\n %s, %v\nwant\n %s, %v", got, err, want, wantErr)
		}
	})
}
