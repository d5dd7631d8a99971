package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
)

// TestModelRetryingSaid: a provider's retry of the turn's request is a
// model.retrying event, before the turn's text, so a page can say why the
// turn is quiet; its fields are the retry's.
func TestModelRetryingSaid(t *testing.T) {
	overloaded := &model.Error{Provider: "anthropic", Status: 529, Message: "Overloaded"}
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if req.OnRetry == nil {
			t.Error("the request has no OnRetry: the session would not hear of retries")
			return model.Response{Text: "fine", StopReason: model.StopEndTurn}, nil
		}
		req.OnRetry(model.Retry{Provider: "anthropic", Attempt: 1, Attempts: 4, Wait: 1500 * time.Millisecond, Err: overloaded})
		req.OnRetry(model.Retry{Provider: "anthropic", Attempt: 2, Attempts: 4, Wait: 2345678 * time.Microsecond, Err: overloaded})
		return model.Response{Text: "fine", StopReason: model.StopEndTurn}, nil
	}}
	met := metrics.New()
	h := setup(t, &testWorker{}, m, engine.Options{Metrics: met})
	h.send("hello")
	for i, backoff := range []string{"1.5s", "2.346s"} {
		f := h.waitType(engine.EventModelRetrying)
		if f.Attempt != i+1 || f.Attempts != 4 || f.Backoff != backoff || f.Error != "anthropic: status 529: Overloaded" {
			t.Errorf("model.retrying %s, want attempt %d of 4, backoff %s, the error as model.finished says it", f.Raw, i+1, backoff)
		}
		if !strings.Contains(string(f.Raw), `"seq":`) {
			t.Errorf("model.retrying %s is no session event: a page that reloads would not see it", f.Raw)
		}
	}
	if f := h.waitType(engine.EventModelDelta); f.Text != "fine" {
		t.Errorf("model.delta %s", f.Raw)
	}
	h.waitIdle()
	if types := h.types(); !strings.Contains(types, "model.retrying model.retrying model.delta model.finished") {
		t.Errorf("events %s: want the retries before the turn's text", types)
	}
	if got := metricOf(t, met, "gateway_model_retries_total"); got.GetCounter().GetValue() != 2 || got.GetLabel()[0].GetValue() != "anthropic" {
		t.Errorf("gateway_model_retries_total %v, want 2 of provider anthropic", got)
	}
}

// TestSubagentModelRetrying: a sub-agent's model.retrying carries the call
// it answers as its parent, as its other events do: a page shows it on the
// call's card, not as the assistant's.
func TestSubagentModelRetrying(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if req.OnRetry != nil {
			req.OnRetry(model.Retry{Attempt: 1, Attempts: 4, Wait: time.Second, Err: &model.Error{Provider: "openai", Status: 503, Message: "busy"}})
		}
		return model.Response{Text: "sunny", StopReason: model.StopEndTurn}, nil
	}}
	w := delegating(engine.AgentTool{Name: "research"})
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	h.send("research the weather")
	f := h.waitType(engine.EventModelRetrying)
	if parentOf(f) != "call_1" || f.Error != "openai: status 503: busy" {
		t.Errorf("the sub-agent's model.retrying %s, want parent call_1 and its error", f.Raw)
	}
	h.waitFor("research's tool.finished", func(f frame) bool {
		return f.Type == engine.EventToolFinished && f.ID == "call_1" && parentOf(f) == ""
	})
	h.waitIdle()
	if n := h.count(engine.EventModelRetrying, ""); n != 1 {
		t.Errorf("%d model.retrying events, want the sub-agent's one", n)
	}
}
