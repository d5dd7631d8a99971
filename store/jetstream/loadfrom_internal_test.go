package jetstream

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// A read from an event starts at the batch that holds it, found with a few
// looks at single messages, among another session's messages; a server
// that knows no batched direct get reads from the start, with the same
// events after it.
func TestLoadFromReadsTheBatchThatHoldsTheEvent(t *testing.T) {
	s, ctx := openForLoad(t)
	next := int64(1)
	for i := range 400 {
		var b engine.Batch
		if i%9 == 4 {
			b.State = json.RawMessage(fmt.Sprintf(`{"step":%d}`, i)) // no event
		}
		for range i % 3 {
			b.Events = append(b.Events, engine.Event{Seq: next, Type: "model.delta",
				Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d}`, next))})
			next++
		}
		if b.State == nil && b.Events == nil {
			b.State = json.RawMessage(`{}`)
		}
		if err := s.Append(ctx, "long", b); err != nil {
			t.Fatal(err)
		}
		other := engine.Event{Seq: int64(i + 1), Type: "message", Frame: json.RawMessage(`{"type":"message"}`)}
		if err := s.Append(ctx, "other", engine.Batch{Events: []engine.Event{other}}); err != nil {
			t.Fatal(err)
		}
	}
	last := next - 1
	requests := watchDirectGets(t, s, JournalStream)
	for _, from := range []int64{2, 57, last / 2, last - 1, last} {
		got, err := s.LoadFrom(ctx, "long", from)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || len(got[0].Events) == 0 {
			t.Fatalf("LoadFrom %d: %d batches, the first with no event", from, len(got))
		}
		first := got[0].Events
		if first[0].Seq > from || first[len(first)-1].Seq < from {
			t.Errorf("LoadFrom %d started at a batch of events %d to %d, not the one that holds it", from, first[0].Seq, first[len(first)-1].Seq)
		}
		if events := eventsOf(got); events[len(events)-1].Seq != last {
			t.Errorf("LoadFrom %d ended at event %d, want %d", from, events[len(events)-1].Seq, last)
		}
		// The journal is 400 of the stream's 800 messages: at most twenty
		// looks (back from the end, then halving; ten for a binary search),
		// and the read.
		if n := requests(); n > 24 {
			t.Errorf("LoadFrom %d took %d direct gets", from, n)
		}
	}
	s.noBatchGet.Store(true)
	got, err := s.LoadFrom(ctx, "long", last/2)
	if err != nil {
		t.Fatal(err)
	}
	if events := eventsOf(got); events[0].Seq != 1 || events[len(events)-1].Seq != last {
		t.Errorf("LoadFrom by a consumer: events %d to %d, want 1 to %d", events[0].Seq, events[len(events)-1].Seq, last)
	}
}

// eventsOf is the events of batches, in order.
func eventsOf(batches []engine.Batch) []engine.Event {
	var out []engine.Event
	for _, b := range batches {
		out = append(out, b.Events...)
	}
	return out
}

// firstEvent reads where a journal message's batch starts, if it does.
func TestFirstEvent(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		seq        int64
		ok, fails  bool
	}{
		{"a batch", `{"e":[{"q":42,"t":"message","f":{}}],"s":{}}`, 42, true, false},
		{"a state alone", `{"s":{"n":1}}`, 0, false, false},
		{"no event", `{"e":[],"s":{}}`, 0, false, false},
		{"a set's first part", "~part 1/3 set1\n" + `{"e":[{"q":7,"t":"tool.fin`, 7, true, false},
		{"a set's later part", "~part 2/3 set1\n" + `{"e":[{"q":8,"t":"tool.fin`, 0, false, false},
		{"a part without its line's end", "~part 1/3", 0, false, true},
		{"a seq that is no number", `{"e":[{"q":"x"}]}`, 0, false, true},
		{"spaces", `{"e": [{"q": 3}]}`, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok, err := firstEvent([]byte(tc.data))
			if seq != tc.seq || ok != tc.ok || (err != nil) != tc.fails {
				t.Errorf("firstEvent(%q) = %d, %t, %v; want %d, %t, failing %t", tc.data, seq, ok, err, tc.seq, tc.ok, tc.fails)
			}
		})
	}
}
