package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// marshalRoundTrip is what canonicalArgs gives the long way: Unmarshal
// into an any, Marshal; ok is false when either refuses.
func marshalRoundTrip(s string) (string, bool) {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return "", false
	}
	b, err := marshalNoHTML(v)
	return string(b), err == nil
}

// isCanonical is canonicalScanner's verdict on s.
func isCanonical(s string) bool {
	c := canonicalScanner{quickParser{s: s}}
	return c.value(0) && c.i == len(s)
}

var canonicalSeeds = []string{
	`{"text":"echo 1000"}`, `{"city":"Tokyo","days":3,"units":"metric"}`, `{"a":[1,-2,true,false,null],"b":{}}`,
	`{"z":"日本","é":"ü"}`, `[]`, `"x"`, `0`, `-7`, `123456789012345`,
	// Not as Marshal writes them: the long way decides.
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, ` {"a":1}`, `{"a": 1}`, `{"a":1.5}`, `{"a":1e3}`, `{"a":-0}`, `{"a":01}`,
	`{"a":1234567890123456}`, `{"a":"<b>"}`, `{"a":"x&y"}`, `{"a":"b\nc"}`, `{"a":"\u00e9"}`, "{\"a\":\"\xff\"}",
	"{\"a\":\"\u2028\"}", "{\"a\":\"\x01\"}", `{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":1} x`, `tru`, `-`, `{`, `"x`,
	`[` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 101),
}

// TestCanonicalArgs: arguments Marshal would write the same are kept as
// they are; others are written as Marshal writes them, so two spellings of
// the same arguments compare equal.
func TestCanonicalArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"text":"echo 1000"}`, `{"text":"echo 1000"}`},
		{`{ "b": 1, "a": [1, 2] }`, `{"a":[1,2],"b":1}`},
		{`{"a":1.50}`, `{"a":1.5}`},
		{`{"a":"<b>"}`, `{"a":"<b>"}`},
		{`{"a":"\u003cb\u003e"}`, `{"a":"<b>"}`},
		{`not json`, `not json`},
	} {
		if got := canonicalArgs(tc.in); got != tc.want {
			t.Errorf("canonicalArgs(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, s := range canonicalSeeds {
		checkCanonical(t, s)
	}
	for _, s := range canonicalSeeds[:9] {
		if !isCanonical(s) {
			t.Errorf("%s: declined, though Marshal writes it the same (the fast path should take it)", s)
		}
	}
}

func checkCanonical(t *testing.T, s string) {
	t.Helper()
	if !isCanonical(s) {
		return
	}
	if got, ok := marshalRoundTrip(s); !ok || got != s {
		t.Errorf("%q taken as canonical; Marshal writes %q (ok %v)", s, got, ok)
	}
}

func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add(s)
	}
	f.Fuzz(checkCanonical)
}
