package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestSubagentWorkerCallAcrossRestart: a sub-agent's worker call running
// when the gateway stops may have done what its tool does, and the
// sub-agent that called it is gone: it settles interrupted, as the
// session's own worker call would, not cancelled (an outside audit: a
// send that reached the worker read as stopped by the user). One in its
// backoff had no attempt running: cancelled.
func TestSubagentWorkerCallAcrossRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff bool // the call's first attempt failed, and it waits to try again
		code    engine.ErrorCode
	}{
		{"running", false, engine.CodeInterrupted},
		{"in its backoff", true, engine.CodeCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, r *rig) {
				root := callsThenSummary(use("call_1", "research", `{}`))
				helper := callsThenSummary(use("call_1", "get_weather", `{"city":"A"}`))
				both := helperAndRoot(helper, root)
				helper2 := helperAgent
				if tc.backoff {
					helper2.Tools = append([]engine.AgentTool(nil), helperAgent.Tools...)
					helper2.Tools[0].Retry = &engine.RetryPolicy{Attempts: 2, Backoff: "1h"}
				}
				w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "research"}}}}
				reached := make(chan struct{}, 1)
				w.execute = func(ctx context.Context, te engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
					switch {
					case te.Name == "research":
						return engine.Decision{Actions: []engine.Action{engine.ToolDelegate{Agent: helper2}}}, nil
					case tc.backoff:
						reached <- struct{}{}
						return engine.Decision{Actions: []engine.Action{engine.ToolError{Error: "busy", Retryable: true}}}, nil
					}
					reached <- struct{}{}
					<-ctx.Done() // running until the gateway stops
					return engine.Decision{}, ctx.Err()
				}
				e1 := r.start(w, both)
				s1, err := e1.Open(context.Background(), engine.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				p1 := attach(t, s1, 0)
				_ = p1.page.Send(context.Background(), "go")
				<-reached
				if tc.backoff {
					p1.until("the backoff", isType(engine.EventToolRetrying))
				}
				stop(t, e1)

				s2 := r.resumed(w, both, s1.ID())
				p2 := attach(t, s2, 0)
				got := p2.until("the research settled", func(ev engine.Event) bool {
					return ev.Type == engine.EventToolFinished && !strings.Contains(string(ev.Frame), `"parent"`)
				})
				finished := 0
				for _, ev := range got {
					var f struct{ Name, Code string }
					_ = json.Unmarshal(ev.Frame, &f)
					if ev.Type != engine.EventToolFinished || f.Name != "get_weather" {
						continue
					}
					finished++
					if f.Code != string(tc.code) {
						t.Errorf("the helper's get_weather finished %s, want code %s", ev.Frame, tc.code)
					}
				}
				if finished != 1 {
					t.Errorf("the helper's get_weather finished %d times, want once", finished)
				}
				checkJournal(t, r.store, s1.ID())
			})
		})
	}
}
