package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// TestLoadsTheFirstJournalsSettledCalls: the first durable version's
// journal kept a call that settled with all its siblings as its id alone
// (no retry spec) in the state; a session it wrote loads, its settled call
// stays settled, and the chat goes on. Later versions took such a state
// for a corrupt journal, and the chat could not be opened again.
func TestLoadsTheFirstJournalsSettledCalls(t *testing.T) {
	r := &rig{t: t, clock: clock.NewFake(epoch)}
	mem := engine.NewMemoryStore()
	r.open = func() engine.Store { return mem }
	w := confirmWorker(nil)
	m := callsThenSummary(use("call_1", "confirm", `{}`))
	e1 := r.start(w, m)
	s1, err := e1.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p1 := attach(t, s1, 0, "confirm")
	if err := p1.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	p1.until("tool.call", isType(engine.FrameToolCall))
	if err := p1.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	p1.until("the reply", finalIdle("saw: yes"))
	stop(t, e1)

	// The journal as the first version wrote it: the last state names
	// the settled call by its id alone.
	batches, err := mem.Load(context.Background(), s1.ID())
	if err != nil {
		t.Fatal(err)
	}
	old := engine.NewMemoryStore()
	for i, b := range batches {
		if i == len(batches)-1 {
			var st map[string]json.RawMessage
			if err := json.Unmarshal(b.State, &st); err != nil {
				t.Fatal(err)
			}
			st["calls"] = json.RawMessage(`[{"id":"call_1","handler":"client","settled":true}]`)
			if b.State, err = json.Marshal(st); err != nil {
				t.Fatal(err)
			}
		}
		if err := old.Append(context.Background(), s1.ID(), b); err != nil {
			t.Fatal(err)
		}
	}
	r.open = func() engine.Store { return old }
	s2 := r.loaded(w, m, s1.ID())
	p2 := attach(t, s2, s2.LastSeq(), "confirm")
	if err := p2.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"again"`)}); !errors.Is(err, engine.ErrSettled) {
		t.Errorf("an answer to the settled call after the load: %v, want ErrSettled", err)
	}
	if err := p2.page.Send(context.Background(), "more"); err != nil {
		t.Fatal(err)
	}
	p2.until("the next call", isType(engine.FrameToolCall))
}

// TestStepLargerThanAMessage: worker tools whose results together pass
// what one NATS message holds (the HTTP worker takes 4 MiB a result, and
// the embedded server 8 MiB a message; here a server takes 64 KiB, and
// each result is half that) end their turn, and the session loads again
// with each result once. The JetStream store splits such a step; without
// that it was refused and retried for ever, and the session took no turn
// again.
func TestStepLargerThanAMessage(t *testing.T) {
	const maxPayload = 64 << 10
	const size = maxPayload/2 - 64
	forEachStoreOf(t, maxPayload, func(t *testing.T, r *rig) {
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "export"}}}}
		w.execute = func(ctx context.Context, x engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			result, _ := json.Marshal(strings.Repeat(x.ID[len(x.ID)-1:], size))
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: result}}}, nil
		}
		m := callsThenSummary(use("call_1", "export", `{}`), use("call_2", "export", `{}`))
		s, err := r.start(w, m).Open(context.Background(), engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		if err := p.page.Send(context.Background(), "export both"); err != nil {
			t.Fatal(err)
		}
		p.until("the reply", finalIdle("saw: "))

		s2 := r.loaded(w, m, s.ID())
		transcript, err := s2.Transcript(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		results := map[string]int{}
		for _, msg := range transcript {
			if msg.Role == model.RoleTool {
				results[msg.ToolUseID] = len(msg.Content)
			}
		}
		if len(results) != 2 || results["call_1"] < size || results["call_2"] < size {
			t.Errorf("the tool results after a load (bytes by call): %v; want call_1 and call_2, %d bytes each", results, size)
		}
		checkJournal(t, r.store, s.ID())
	})
}

// TestLongResultsStoredOnce: the results of a batch of parallel calls are
// each stored once, in their tool.finished events, not again in the state
// of every step until the batch settles (N² for N calls: an outside
// audit's 30 results of 1 MB made a 473 MB journal); and a restart while
// the batch is part settled gives the settled results back whole, from
// those events.
func TestLongResultsStoredOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		const calls, size = 6, 64 << 10
		release := make(chan struct{})
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "export"}}}}
		w.execute = func(ctx context.Context, x engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			n := x.ID[len(x.ID)-1] - '0'
			if n > calls/2 {
				select { // the second half runs until the restart
				case <-release:
				case <-ctx.Done():
					return engine.Decision{}, ctx.Err()
				}
			}
			result, _ := json.Marshal(strings.Repeat(string(rune('a'+n)), size))
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: result}}}, nil
		}
		var uses []model.ToolUse
		for i := 1; i <= calls; i++ {
			uses = append(uses, use(fmt.Sprintf("call_%d", i), "export", fmt.Sprintf(`{"part":%d}`, i))) // not repeats (MaxRepeats)
		}
		m := callsThenSummary(uses...)
		e1 := r.start(w, m)
		s, err := e1.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		if err := p.page.Send(context.Background(), "export them"); err != nil {
			t.Fatal(err)
		}
		settled := 0
		p.until("the first half settled", func(ev engine.Event) bool {
			if ev.Type == engine.EventToolFinished {
				settled++
			}
			return settled == calls/2
		})
		stateBytes := 0
		batches, err := r.store.Load(context.Background(), s.ID())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			stateBytes += len(b.State)
		}
		if stateBytes > size {
			t.Errorf("the states stored so far hold %d bytes, more than one result (%d): they keep the results", stateBytes, size)
		}
		if js, ok := r.store.(*jetstream.Store); ok {
			// A version before such states cannot read them: it must refuse
			// to start on this journal, not fail the chat when it is opened.
			if f := journalFormat(t, js); f != "2" {
				t.Errorf("the journal's format after a state that leaves results to their events: %q, want 2", f)
			}
		}

		stop(t, e1)
		close(release)
		// From where the first process stopped: the session loaded anew
		// may have replied before the page attaches.
		s2 := r.loaded(w, m, s.ID())
		p2 := attach(t, s2, s.LastSeq())
		p2.until("the reply", finalIdle("saw: "))
		transcript, err := s2.Transcript(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range toolMessages(transcript) {
			n := msg.ToolUseID[len(msg.ToolUseID)-1] - '0'
			if n > calls/2 {
				continue // cut by the restart: settled as the restart settles them
			}
			if want, _ := json.Marshal(strings.Repeat(string(rune('a'+n)), size)); msg.Content != string(want) && msg.Content != string(want[1:len(want)-1]) {
				t.Errorf("%s's result after the restart: %d bytes, %.40q…; want its %d bytes", msg.ToolUseID, len(msg.Content), msg.Content, size)
			}
		}
		checkJournal(t, r.store, s.ID())
	})
}

// journalFormat is the data format the JetStream store's journal stream
// says it holds.
func journalFormat(t *testing.T, s *jetstream.Store) string {
	t.Helper()
	js, err := natsjs.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), jetstream.JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Config.Metadata["gateway.format"]
}
