package jetstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestEncodeBatchReadsBack: a batch written by hand reads back as it was,
// and as encoding/json wrote it before.
func TestEncodeBatchReadsBack(t *testing.T) {
	frame := json.RawMessage(`{"type":"message","seq":7,"message":{"role":"user","content":"<b>é\n</b>"}}`)
	for _, b := range []engine.Batch{
		{},
		{State: json.RawMessage(`{"v":1}`)},
		{Events: []engine.Event{{Seq: 7, Type: "message", Frame: frame}}},
		{Events: []engine.Event{{Seq: 7, Type: "message", Frame: frame}, {Seq: 8, Type: "odd \"type\"\n<&>", Frame: json.RawMessage(`{}`)}}, State: json.RawMessage(`{"calls":[]}`)},
	} {
		data, err := encodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(data) {
			t.Fatalf("%s is not JSON", data)
		}
		got, err := decodeBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("read back %+v, want %+v", got, b)
		}
		// The same document encoding/json wrote: the same members, the
		// same values.
		sb := batch{State: b.State}
		for _, ev := range b.Events {
			sb.Events = append(sb.Events, storedEvent{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame})
		}
		old, err := json.Marshal(sb)
		if err != nil {
			t.Fatal(err)
		}
		var a, o any
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(old, &o); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, o) {
			t.Errorf("wrote %s, encoding/json %s", data, old)
		}
	}
	if _, err := encodeBatch(engine.Batch{Events: []engine.Event{{Seq: 1, Type: "message"}}}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("no frame")) {
		t.Errorf("an event with no frame: %v, want an error saying so", err)
	}
}
