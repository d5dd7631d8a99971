package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestAppendAfterATryThatLandedLate: a publish that timed out while NATS was
// away is sent by the client once it is back, and lands after the engine
// gave it up and tried again. The retry is the same batch, or the same
// with what waited meanwhile joined to it. The journal must hold each
// event once, and the session go on: not a gap refused for ever, nor a
// fence that takes the session from its own node. Another node's events
// in that place are fenced, whether the store's publish was refused or it
// read the journal's end itself (as after taking the lease, when the
// engine has just loaded the journal): the session's node is behind its
// journal, and the session loads again from it (it was a gap, refused for
// ever). Staged by publishing the earlier try behind the store's back,
// with the store's idea of the journal's end kept (its next publish is
// refused) or forgotten (it reads the end).
func TestAppendAfterATryThatLandedLate(t *testing.T) {
	ev := func(seq int64, text string) engine.Event {
		return engine.Event{Seq: seq, Type: "model.delta", Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":%q}`, seq, text))}
	}
	state := json.RawMessage(`{"v":1}`)
	tests := []struct {
		name   string
		landed engine.Batch // behind the store's back, after event 1
		retry  engine.Batch
		theirs bool     // the landed batch is another node's
		want   []string // the journal's events after the retry
	}{
		{"the same batch", engine.Batch{Events: []engine.Event{ev(2, "b")}, State: state},
			engine.Batch{Events: []engine.Event{ev(2, "b")}, State: state}, false, []string{"a", "b"}},
		{"a delta, then the retry with the step after it", engine.Batch{Events: []engine.Event{ev(2, "b")}},
			engine.Batch{Events: []engine.Event{ev(2, "b"), ev(3, "c")}, State: state}, false, []string{"a", "b", "c"}},
		{"a step with no event", engine.Batch{State: json.RawMessage(`{"v":2}`)},
			engine.Batch{State: json.RawMessage(`{"v":2}`)}, false, []string{"a"}},
		{"another node's event", engine.Batch{Events: []engine.Event{ev(2, "other")}, State: state},
			engine.Batch{Events: []engine.Event{ev(2, "b")}, State: state}, true, []string{"a", "other"}},
		{"another node's step, then this retry's", engine.Batch{Events: []engine.Event{ev(2, "b")}, State: json.RawMessage(`{"v":9}`)},
			engine.Batch{Events: []engine.Event{ev(2, "b")}, State: state}, true, []string{"a", "b"}},
	}
	for _, tc := range tests {
		for _, forget := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/head forgotten %v", tc.name, forget), func(t *testing.T) {
				ctx := context.Background()
				s, err := Open(ctx, Options{DataDir: t.TempDir(), Node: "n1"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if _, err := s.Own(ctx, "s1", func() {}); err != nil {
					t.Fatal(err)
				}
				if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(1, "a")}}); err != nil {
					t.Fatal(err)
				}
				h, _ := s.headOf(ctx, "s1")
				data, err := encodeBatch(tc.landed)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.publish(ctx, subject("s1"), data, h.stream); err != nil {
					t.Fatal(err)
				}
				if forget {
					s.forgetHead("s1")
				}
				err = s.Append(ctx, "s1", tc.retry)
				switch {
				case !tc.theirs && err != nil:
					t.Fatalf("the retry: %v, want it taken", err)
				case tc.theirs && !errors.Is(err, ErrFenced):
					t.Fatalf("the retry: %v, want ErrFenced", err)
				}
				var got []string
				for _, e := range journal(t, s, "s1") {
					var f struct{ Text string }
					_ = json.Unmarshal(e.Frame, &f)
					got = append(got, f.Text)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("journal's events %v, want %v", got, tc.want)
				}
				if tc.theirs {
					return
				}
				// And the session goes on after it.
				next := ev(int64(len(tc.want)+1), "next")
				if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{next}}); err != nil {
					t.Fatalf("the append after: %v", err)
				}
			})
		}
	}
}

// journal is every event of session's journal, in order.
func journal(t *testing.T, s *Store, session string) []engine.Event {
	t.Helper()
	batches, err := s.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var events []engine.Event
	for _, b := range batches {
		events = append(events, b.Events...)
	}
	return events
}

// journalSeqs is the seq of every event of session's journal, in order.
func journalSeqs(t *testing.T, s *Store, session string) []int64 {
	t.Helper()
	var seqs []int64
	for _, e := range journal(t, s, session) {
		seqs = append(seqs, e.Seq)
	}
	return seqs
}
