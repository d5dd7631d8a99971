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

// The batches the store writes are read by hand, not by encoding/json:
// a step's, a model's deltas, a state alone, frames with escapes and
// numbers of every form.
func TestBatchReadByHand(t *testing.T) {
	frame := json.RawMessage(`{"type":"tool.finished","seq":12,"ok":true,"result":"{\"n\":-1.5e+3,\"s\":\"\\u00e9\\n\",\"l\":[true,false,null,{}]}"}`)
	for _, b := range []engine.Batch{
		{State: json.RawMessage(`{"v":1,"calls":[{"id":"call_1","spec":{"timeout":30000000000,"multiplier":2.5}}]}`)},
		{Events: []engine.Event{{Seq: 3, Type: "model.delta", Frame: json.RawMessage(`{"type":"model.delta","seq":3,"text":"<é>"}`)}}},
		{Events: []engine.Event{{Seq: 11, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":11,"message":{"role":"user","content":"a \"quote\""}}`)}, {Seq: 12, Type: "tool.finished", Frame: frame}}, State: json.RawMessage(`{"v":1}`)},
	} {
		data, err := encodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := quickBatch(data)
		if !ok {
			t.Fatalf("%s was not read by hand", data)
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("read by hand %+v, want %+v", got, b)
		}
	}
}

// quickBatch reads nothing otherwise than encoding/json does, and declines
// what it does not read.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{
		`{"e":[{"q":1,"t":"message","f":{"type":"message","seq":1}}],"s":{"v":1}}`,
		`{"s":{"v":1}}`, `{"e":[{"q":2,"t":"model.delta","f":{"a":[1,-0,2.5e-3,"\u00e9\\"]}}]}`,
		`{"e":[{"q":01,"t":"x","f":{}}]}`, `{"e":[{"q":1,"t":"x","f":{}}],"s":null}`, `{"e":[{"q":1,"t":"x","f":null}]}`,
		`{"e":[]}`, `{}`, `{"e":[{"q":1,"t":"x","f":{"a":1,}}]}`, `{"e":[{"q":9223372036854775808,"t":"x","f":1}]}`,
		`{"e":[{"q":1,"t":"\u0078","f":"s"}]}`, `{"e":[{"q":1,"t":"x","f":"\ud800"}]}`, `{"s":[1,2]} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		quick, ok := quickBatch(data)
		if !ok {
			return
		}
		var sb batch
		if err := json.Unmarshal(data, &sb); err != nil {
			t.Fatalf("quickBatch(%q) read %+v; encoding/json: %v", data, quick, err)
		}
		want := engine.Batch{State: sb.State}
		for _, ev := range sb.Events {
			want.Events = append(want.Events, engine.Event{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame})
		}
		if !reflect.DeepEqual(quick, want) {
			t.Fatalf("quickBatch(%q) = %+v; encoding/json %+v", data, quick, want)
		}
	})
}
