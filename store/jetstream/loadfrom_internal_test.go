package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/storetest"
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
		kind       start
		fails      bool
	}{
		{"a batch", `{"e":[{"q":42,"t":"message","f":{}}],"s":{}}`, 42, startsEvents, false},
		{"a state alone", `{"s":{"n":1}}`, 0, startsNone, false},
		{"no event", `{"e":[],"s":{}}`, 0, startsNone, false},
		{"a set's first part", "~part 1/3 set1\n" + `{"e":[{"q":7,"t":"tool.fin`, 7, startsEvents, false},
		{"a set's later part", "~part 2/3 set1\n" + `{"e":[{"q":8,"t":"tool.fin`, 0, goesOnSet, false},
		{"a part without its line's end", "~part 1/3", 0, startsNone, true},
		{"a seq that is no number", `{"e":[{"q":"x"}]}`, 0, startsNone, true},
		{"spaces", `{"e": [{"q": 3}]}`, 0, startsNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, kind, err := firstEvent([]byte(tc.data))
			if seq != tc.seq || kind != tc.kind || (err != nil) != tc.fails {
				t.Errorf("firstEvent(%q) = %d, %d, %v; want %d, %d, failing %t", tc.data, seq, kind, err, tc.seq, tc.kind, tc.fails)
			}
		})
	}
}

// LoadFrom is exact from every event of a journal with sets of parts that
// stopped short (another writer died part way), sets whole, steps with a
// state alone, and another session's messages between them; its looks
// stop at a set's later part rather than read on through the set.
func TestLoadFromAcrossSetsOfParts(t *testing.T) {
	ctx := context.Background()
	s := openSmall(t)
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	next := int64(1)
	var all []engine.Event
	for i := range 30 { // three rounds of the ten kinds of step: each load reads the rest of the journal
		var b engine.Batch
		switch {
		case i%10 == 3:
			b.Events = []engine.Event{partEvent(next, 150<<10)}
		case i%10 == 6:
			b.State = json.RawMessage(`{"n":1}`)
		default:
			for range 1 + i%2 {
				b.Events = append(b.Events, partEvent(next, 10))
				next++
			}
		}
		if i%10 == 3 {
			// Another writer's try of this step, stopped part way, first.
			h, _ := s.headOf(ctx, "s1")
			other := cutBatch(t, s, engine.Batch{Events: []engine.Event{partEvent(next, 160<<10)}}, fmt.Sprintf("theirs%d", i))
			other.land(t, "s1", 1, 2, h.stream)
			s.forgetHead("s1")
			next++
		}
		if err := s.Append(ctx, "s1", b); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		all = append(all, b.Events...)
		if err := s.Append(ctx, "s2", engine.Batch{Events: []engine.Event{partEvent(int64(i+1), 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("test setup: event %d has seq %d", i, ev.Seq)
		}
	}
	storetest.LoadsFromEveryEvent(t, s, "s1", all)
}

// partEvent is an event of about size bytes.
func partEvent(seq int64, size int) engine.Event {
	return engine.Event{Seq: seq, Type: "tool.finished", Frame: json.RawMessage(fmt.Sprintf(`{"type":"tool.finished","seq":%d,"text":%q}`, seq, strings.Repeat(string(rune('a'+seq%26)), size)))}
}
