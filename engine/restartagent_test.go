package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
)

// A stored chat's agent across a restart to a gateway that serves it
// otherwise: its model not served, its call of a made-up tool.

// TestRestartModelNoLongerServed: a stored chat whose model the restarted
// gateway does not serve (its provider's key is gone) still opens, its
// history whole; each model turn then fails, saying which model and why.
func TestRestartModelNoLongerServed(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{}
		m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
			return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
		}}
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0)
		if err := p1.page.Send(context.Background(), "hi"); err != nil {
			t.Fatal(err)
		}
		p1.until("the reply", finalIdle("done"))
		stop(t, e1)

		r.unserved = true
		s2 := r.loaded(w, m, s1.ID())
		p2 := attach(t, s2, 0)
		p2.until("the history's reply", finalIdle("done"))
		if err := p2.page.Send(context.Background(), "again"); err != nil {
			t.Fatal(err)
		}
		failed := p2.until("the model turn's failure", isType(engine.EventError))
		if f := string(failed[len(failed)-1].Frame); !strings.Contains(f, `"code":"model_failed"`) || !strings.Contains(f, `this chat's model \"fake-model\" is not served by this gateway now`) {
			t.Errorf("error %s, want model_failed naming the chat's model", f)
		}
		p2.until("the end of the turn", isType(engine.EventSessionIdle))
	})
}

// TestRestartKeepsAMadeUpToolsLabel: a call of a tool the model made up,
// running at a restart, is counted under "(undeclared)" when it settles
// after it, as before it: metrics' labels come from a bounded set.
func TestRestartKeepsAMadeUpToolsLabel(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{}
		w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			<-ctx.Done() // cut by the restart
			return engine.Decision{}, ctx.Err()
		}
		m := callsThenSummary(use("call_1", "made_up_by_the_model", `{}`))
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0)
		_ = p1.page.Send(context.Background(), "go")
		p1.until("tool.started", isType(engine.EventToolStarted))
		stop(t, e1)

		r.metrics = metrics.New()
		s2 := r.resumed(w, m, s1.ID())
		attach(t, s2, 0).until("the reply", finalIdle("saw: "))
		settled := metricOf(t, r.metrics, "gateway_tool_calls_settled_total")
		for _, l := range settled.GetLabel() {
			if l.GetName() == "tool" && l.GetValue() != "(undeclared)" {
				t.Errorf("the call settled under tool=%q, want (undeclared)", l.GetValue())
			}
		}
	})
}
