package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// Run runs the contract against stores from open, each empty.
func Run(t *testing.T, open func(t *testing.T) engine.Store) {
	t.Run("journal", func(t *testing.T) { journal(t, open(t)) })
	t.Run("seq gaps are refused", func(t *testing.T) { gaps(t, open(t)) })
	t.Run("sessions are separate", func(t *testing.T) { separate(t, open(t)) })
	t.Run("summaries", func(t *testing.T) { summaries(t, open(t)) })
	t.Run("owners an app names", func(t *testing.T) { appOwners(t, open(t)) })
	t.Run("delete", func(t *testing.T) { deletes(t, open(t)) })
	t.Run("large batch", func(t *testing.T) { large(t, open(t)) })
	t.Run("summaries changed", func(t *testing.T) { optional(t, open(t), changed) })
	t.Run("journal from an event", func(t *testing.T) { optional(t, open(t), journalFrom) })
}

// optional runs test on s as an I, or skips it when s is none.
func optional[I any](t *testing.T, s engine.Store, test func(*testing.T, engine.Store, I)) {
	i, ok := s.(I)
	if !ok {
		t.Skipf("the store is not a %T", (*I)(nil))
	}
	test(t, s, i)
}

func event(seq int64, typ string) engine.Event {
	return engine.Event{Seq: seq, Type: typ, Frame: json.RawMessage(fmt.Sprintf(`{"type":%q,"seq":%d}`, typ, seq))}
}

func journal(t *testing.T, s engine.Store) {
	ctx := context.Background()
	if _, err := s.Load(ctx, "nobody"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Load of a session never appended: %v, want ErrNoSession", err)
	}
	state := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name    string
		batches []engine.Batch
		// The states Load must return, in this order; others appended may
		// be there too, in the order appended.
		want []string
	}{
		{"steps, a delta, a step with no event", []engine.Batch{
			{Events: []engine.Event{event(1, "message"), event(2, "model.delta")}, State: state(`{"v":1,"agent":{"model":"a"},"n":1}`), Agent: true},
			{Events: []engine.Event{event(3, "model.delta")}}, // a delta: no state
			{State: state(`{"v":1,"n":2}`)},                   // a step with no event
			{Events: []engine.Event{event(4, "session.idle")}, State: state(`{"v":1,"n":3}`)},
		}, []string{`{"v":1,"agent":{"model":"a"},"n":1}`, `{"v":1,"n":3}`}},
		{"the agent changed in the last step", []engine.Batch{
			{Events: []engine.Event{event(1, "message")}, State: state(`{"v":1,"agent":{"model":"a"}}`), Agent: true},
			{Events: []engine.Event{event(2, "message")}, State: state(`{"v":1,"n":2}`)},
			{Events: []engine.Event{event(3, "message")}, State: state(`{"v":1,"agent":{"model":"b"},"n":3}`), Agent: true},
		}, []string{`{"v":1,"agent":{"model":"b"},"n":3}`}},
		{"the agent changed twice, steps after", []engine.Batch{
			{Events: []engine.Event{event(1, "message")}, State: state(`{"v":1,"agent":{"model":"a"}}`), Agent: true},
			{Events: []engine.Event{event(2, "message")}, State: state(`{"v":1,"agent":{"model":"b"},"n":2}`), Agent: true},
			{Events: []engine.Event{event(3, "message")}, State: state(`{"v":1,"n":3}`)},
			{Events: []engine.Event{event(4, "model.delta"), event(5, "model.delta")}},
		}, []string{`{"v":1,"agent":{"model":"b"},"n":2}`, `{"v":1,"n":3}`}},
		{"events only", []engine.Batch{
			{Events: []engine.Event{event(1, "model.delta")}},
			{Events: []engine.Event{event(2, "model.delta")}},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			var appended []string
			var events []engine.Event
			for i, b := range tc.batches {
				if err := s.Append(ctx, id, b); err != nil {
					t.Fatalf("Append %d: %v", i, err)
				}
				if b.State != nil {
					appended = append(appended, string(b.State))
				}
				events = append(events, b.Events...)
			}
			got, err := s.Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var gotEvents []engine.Event
			var gotStates []string
			for _, b := range got {
				gotEvents = append(gotEvents, b.Events...)
				if b.State != nil {
					gotStates = append(gotStates, string(b.State))
				}
			}
			if show(engine.Batch{Events: gotEvents}) != show(engine.Batch{Events: events}) {
				t.Errorf("Load's events: %s, want %s", show(engine.Batch{Events: gotEvents}), show(engine.Batch{Events: events}))
			}
			if !subsequence(gotStates, appended) || !subsequence(tc.want, gotStates) {
				t.Errorf("Load's states: %q; want %q among them, each of them appended (%q), in that order", gotStates, tc.want, appended)
			}
		})
	}
}

// subsequence: every string of sub is in of, in the same order.
func subsequence(sub, of []string) bool {
	for _, s := range sub {
		i := slices.Index(of, s)
		if i < 0 {
			return false
		}
		of = of[i+1:]
	}
	return true
}

// sameBatch compares a and b field by field, not through show: a large
// batch's copies cost seconds under -race.
func sameBatch(a, b engine.Batch) bool {
	return sameEvents(a.Events, b.Events) && string(a.State) == string(b.State)
}

func sameEvents(a, b []engine.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Type != b[i].Type || string(a[i].Frame) != string(b[i].Frame) {
			return false
		}
	}
	return true
}

func show(b engine.Batch) string {
	var parts []string
	for _, ev := range b.Events {
		parts = append(parts, fmt.Sprintf("%d/%s/%s", ev.Seq, ev.Type, ev.Frame))
	}
	return fmt.Sprintf("events [%s] state %s", strings.Join(parts, " "), b.State)
}

func gaps(t *testing.T, s engine.Store) {
	ctx := context.Background()
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{event(2, "message")}}); !errors.Is(err, engine.ErrSeqGap) {
		t.Errorf("a first event that is not 1: %v, want ErrSeqGap", err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{event(1, "message")}, State: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{1, 3} {
		if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{event(seq, "message")}}); !errors.Is(err, engine.ErrSeqGap) {
			t.Errorf("event %d after 1: %v, want ErrSeqGap", seq, err)
		}
	}
	got, err := s.Load(ctx, "s1")
	if err != nil || len(got) != 1 {
		t.Errorf("a refused batch was kept: %d batches, %v", len(got), err)
	}
}

func separate(t *testing.T, s engine.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("s%d", i)
			for seq := int64(1); seq <= 20; seq++ {
				if err := s.Append(ctx, id, engine.Batch{Events: []engine.Event{event(seq, "model.delta")}}); err != nil {
					t.Errorf("%s: Append %d: %v", id, seq, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var want []int64
	for seq := int64(1); seq <= 20; seq++ {
		want = append(want, seq)
	}
	for i := range 8 {
		got, err := s.Load(ctx, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatalf("s%d: %v", i, err)
		}
		var seqs []int64
		for _, b := range got {
			for _, ev := range b.Events {
				seqs = append(seqs, ev.Seq)
			}
		}
		if !slices.Equal(seqs, want) {
			t.Fatalf("s%d: events %v, want %v", i, seqs, want)
		}
	}
}

func summaries(t *testing.T, s engine.Store) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	put := func(sum engine.Summary) {
		t.Helper()
		if err := s.Summarize(ctx, sum); err != nil {
			t.Fatal(err)
		}
	}
	put(engine.Summary{ID: "old", Owner: "alice", Title: "first", Created: base, Updated: base})
	put(engine.Summary{ID: "new", Owner: "alice", Title: "second", Created: base.Add(time.Minute), Updated: base.Add(time.Minute), Busy: true})
	put(engine.Summary{ID: "bob1", Owner: "bob", Created: base, Updated: base})
	put(engine.Summary{ID: "old", Owner: "alice", Title: "first", Created: base, Updated: base.Add(time.Hour), Ended: true}) // replaces
	ids := func(owner string) string {
		t.Helper()
		got, err := s.Summaries(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range got {
			out = append(out, g.ID)
		}
		return strings.Join(out, " ")
	}
	if got := ids("alice"); got != "old new" {
		t.Errorf("alice's sessions, newest first: %q, want \"old new\"", got)
	}
	if got := ids("bob"); got != "bob1" {
		t.Errorf("bob's sessions: %q", got)
	}
	if got := ids("carol"); got != "" {
		t.Errorf("carol's sessions: %q", got)
	}
	if got := ids(""); got != "old new bob1" {
		t.Errorf("every session: %q, want \"old new bob1\"", got)
	}
	all, _ := s.Summaries(ctx, "alice")
	want := engine.Summary{ID: "old", Owner: "alice", Title: "first", Created: base, Updated: base.Add(time.Hour), Ended: true}
	if len(all) == 0 || !all[0].Created.Equal(want.Created) || !all[0].Updated.Equal(want.Updated) || all[0].Title != want.Title || !all[0].Ended || all[0].Busy {
		t.Errorf("summary = %+v, want %+v", all[0], want)
	}
}

// appOwners: owners an app's login names (the gateway's Identify) may hold
// what a store's keys give a meaning to: each lists its own sessions and
// no one else's. On JetStream "alice@example" listed "alice@example.com"'s
// (a "." in a subject), "*" everyone's, and "Bob Smith" failed.
func appOwners(t *testing.T, s engine.Store) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	owners := []string{"alice@example.com", "alice@example", "*", ">", "Bob Smith", "_", "élodie", "a.b.c", "=YWxpY2U"}
	for i, o := range owners {
		if err := s.Summarize(ctx, engine.Summary{ID: fmt.Sprintf("s%d", i), Owner: o, Created: base, Updated: base}); err != nil {
			t.Fatalf("owner %q: %v", o, err)
		}
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "ownerless", Created: base, Updated: base}); err != nil {
		t.Fatal(err)
	}
	for i, o := range owners {
		got, err := s.Summaries(ctx, o)
		if err != nil {
			t.Errorf("owner %q: %v", o, err)
			continue
		}
		if len(got) != 1 || got[0].ID != fmt.Sprintf("s%d", i) || got[0].Owner != o {
			t.Errorf("owner %q lists %+v, want its own s%d alone", o, got, i)
		}
	}
	if all, err := s.Summaries(ctx, ""); err != nil || len(all) != len(owners)+1 {
		t.Errorf("every session: %d, %v; want %d", len(all), err, len(owners)+1)
	}
}

func deletes(t *testing.T, s engine.Store) {
	ctx := context.Background()
	if err := s.Append(ctx, "gone", engine.Batch{Events: []engine.Event{event(1, "message")}, State: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "gone", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "kept", engine.Batch{Events: []engine.Event{event(1, "message")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "gone"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Load after Delete: %v, want ErrNoSession", err)
	}
	if sums, _ := s.Summaries(ctx, "alice"); len(sums) != 0 {
		t.Errorf("summaries after Delete: %+v", sums)
	}
	if got, err := s.Load(ctx, "kept"); err != nil || len(got) != 1 {
		t.Errorf("another session after Delete: %d batches, %v", len(got), err)
	}
	// A deleted session's id starts over from seq 1.
	if err := s.Append(ctx, "gone", engine.Batch{Events: []engine.Event{event(1, "message")}}); err != nil {
		t.Errorf("Append after Delete: %v", err)
	}
}

// large: a batch as big as a browser frame may make it (a 1 MiB tool
// result, in a tool.finished and a tool message) is stored whole, and so
// is one larger than a NATS message (many large results of one step),
// with the journal going on after it.
func large(t *testing.T, s engine.Store) {
	ctx := context.Background()
	frame := func(seq int64, size int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"tool.finished","seq":%d,"result":"`, seq) + strings.Repeat(string(rune('a'+seq%26)), size) + `"}`)
	}
	one := engine.Batch{Events: []engine.Event{{Seq: 1, Type: "tool.finished", Frame: frame(1, 1<<20)}, {Seq: 2, Type: "message", Frame: frame(2, 1<<20)}}, State: json.RawMessage(`{}`)}
	var many engine.Batch
	for seq := int64(3); seq < 8; seq++ {
		many.Events = append(many.Events, engine.Event{Seq: seq, Type: "tool.finished", Frame: frame(seq, 3<<20)})
	}
	many.State = json.RawMessage(`{"calls":"` + strings.Repeat("s", 2<<20) + `"}`)
	after := engine.Batch{Events: []engine.Event{event(8, "message")}, State: json.RawMessage(`{"n":8}`)}
	want := []engine.Batch{one, many, after}
	for i, b := range want {
		if err := s.Append(ctx, "big", b); err != nil {
			t.Fatalf("Append of batch %d (%d events): %v", i+1, len(b.Events), err)
		}
	}
	got, err := s.Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	// A store may join batches (MemoryStore): compare the events, and
	// the last state.
	var events, wantEvents []engine.Event
	for _, b := range got {
		events = append(events, b.Events...)
	}
	for _, b := range want {
		wantEvents = append(wantEvents, b.Events...)
	}
	if len(events) != len(wantEvents) || string(got[len(got)-1].State) != string(after.State) {
		t.Fatalf("Load of the large batches: %d batches, %d events; want %d events, the last state %s", len(got), len(events), len(wantEvents), after.State)
	}
	for i, ev := range events {
		if w := wantEvents[i]; ev.Seq != w.Seq || ev.Type != w.Type || string(ev.Frame) != string(w.Frame) {
			t.Fatalf("event %d of the large batches: seq %d, %s, %d bytes; want seq %d, %s, %d bytes", i+1, ev.Seq, ev.Type, len(ev.Frame), w.Seq, w.Type, len(w.Frame))
		}
	}
	if len(got) == len(want) && !sameBatch(got[1], many) {
		t.Errorf("the batch larger than a message came back another")
	}
}

// changed: a read from a cursor gives the summaries written after it, each
// once and as last written, and none deleted; a read from 0 gives them all.
func changed(t *testing.T, s engine.Store, feed engine.SummaryFeed) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	put := func(id string, busy bool) {
		t.Helper()
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice", Created: base, Updated: base, Busy: busy}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(cursor uint64) engine.Changes {
		t.Helper()
		ch, err := feed.SummariesChanged(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	show := func(sums []engine.Summary) string {
		var out []string
		for _, sum := range sums {
			out = append(out, fmt.Sprintf("%s:%t", sum.ID, sum.Busy))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}

	if ch := read(0); !ch.Whole || len(ch.Summaries) != 0 {
		t.Errorf("an empty store from 0: %+v, want no summary, whole", ch)
	}
	put("a", true)
	put("b", false)
	put("c", false)
	first := read(0)
	if got := show(first.Summaries); !first.Whole || got != "a:true b:false c:false" {
		t.Fatalf("from 0: %q (whole %t), want every summary, whole", got, first.Whole)
	}
	put("b", true)
	put("d", false)
	put("b", false) // b twice since: once, as last written
	second := read(first.Cursor)
	if got := show(second.Summaries); second.Whole || got != "b:false d:false" {
		t.Errorf("since the first read: %q (whole %t), want \"b:false d:false\", not whole", got, second.Whole)
	}
	if ch := read(second.Cursor); len(ch.Summaries) != 0 || ch.Whole || ch.Cursor != second.Cursor {
		t.Errorf("nothing written since: %+v, want nothing, the same cursor %d", ch, second.Cursor)
	}
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	put("c", true)
	if got := show(read(second.Cursor).Summaries); got != "c:true" {
		t.Errorf("after a delete and a write: %q, want the write only", got)
	}
	if got := show(read(0).Summaries); got != "a:true b:false c:true" {
		t.Errorf("from 0 at the end: %q", got)
	}
}

// journalFrom: LoadFrom gives every event from the one asked for on, in
// order, whatever the batches hold (many events, a state alone, more than
// a message's worth), with another session's appends between them.
func journalFrom(t *testing.T, s engine.Store, jf engine.JournalFrom) {
	ctx := context.Background()
	if _, err := jf.LoadFrom(ctx, "nobody", 2); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("LoadFrom of a session never appended: %v, want ErrNoSession", err)
	}
	big := func(seq int64) engine.Event {
		frame := fmt.Sprintf(`{"type":"tool.finished","seq":%d,"result":"`, seq) + strings.Repeat("r", 1<<20+64<<10) + `"}` // past a default NATS server's max_payload, 1 MiB
		return engine.Event{Seq: seq, Type: "tool.finished", Frame: json.RawMessage(frame)}
	}
	var all []engine.Event
	next := int64(1)
	for i := range 40 {
		var b engine.Batch
		switch {
		case i%7 == 3:
			b.State = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)) // a state alone
		case i == 20:
			b.Events = []engine.Event{big(next)} // in parts where a message is smaller
			next++
		default:
			for range 1 + i%3 {
				b.Events = append(b.Events, event(next, "model.delta"))
				next++
			}
		}
		if err := s.Append(ctx, "from", b); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		all = append(all, b.Events...)
		if err := s.Append(ctx, "other", engine.Batch{Events: []engine.Event{event(int64(i+1), "message")}}); err != nil {
			t.Fatalf("Append %d of another session: %v", i, err)
		}
	}
	LoadsFromEveryEvent(t, jf, "from", all)
}

// LoadsFromEveryEvent checks that jf's LoadFrom of session, from each of
// its events, gives the journal's events from that one or an earlier one
// to its end: all, the journal's every event from seq 1.
func LoadsFromEveryEvent(t *testing.T, jf engine.JournalFrom, session string, all []engine.Event) {
	t.Helper()
	for from := int64(1); from <= int64(len(all)); from++ {
		got, err := jf.LoadFrom(context.Background(), session, from)
		if err != nil {
			t.Fatalf("LoadFrom %d: %v", from, err)
		}
		var events []engine.Event
		for _, b := range got {
			events = append(events, b.Events...)
		}
		if len(events) == 0 || events[0].Seq > from {
			t.Fatalf("LoadFrom %d: %d events, from %v on: want event %d among them", from, len(events), events[:min(len(events), 1)], from)
		}
		if !sameEvents(events, all[events[0].Seq-1:]) {
			t.Fatalf("LoadFrom %d: events %d to %d, not the journal's", from, events[0].Seq, events[len(events)-1].Seq)
		}
	}
}
