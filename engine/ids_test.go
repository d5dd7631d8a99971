package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestSessionIDs: a session id is 1 to MaxIDBytes ASCII letters, digits,
// '-' and '_'. Loading any other is ErrNoSession without asking the store
// (a NATS subject cannot take it); opening one is refused.
func TestSessionIDs(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"dqnbghnbp5ze6jbbtlzq", true},
		{"aisdk_ABC-def_09", true},
		{strings.Repeat("x", engine.MaxIDBytes), true},
		{"", false},
		{strings.Repeat("x", engine.MaxIDBytes+1), false},
		{"a.b", false},
		{"*", false},
		{">", false},
		{"a b", false},
		{"$G", false},
		{"é", false},
	} {
		if err := engine.CheckID(tc.id); (err == nil) != tc.ok {
			t.Errorf("CheckID(%.40q): %v, want ok %v", tc.id, err, tc.ok)
		}
	}

	store := &countingLoads{Store: engine.NewMemoryStore()}
	h := setup(t, recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}}), callsThenSummary(), engine.Options{Store: store})
	store.loads = 0
	for _, id := range []string{"a.b", strings.Repeat("x", 4100)} {
		if _, err := h.e.Load(context.Background(), id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("Load(%.40q): %v, want ErrNoSession", id, err)
		}
		if _, err := h.e.Open(context.Background(), engine.OpenOptions{ID: id}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("Open with the id %.40q: %v, want ErrBadRequest", id, err)
		}
	}
	if store.loads != 0 {
		t.Errorf("the store was asked %d times for ids no session has", store.loads)
	}
}

// countingLoads counts the store's Loads.
type countingLoads struct {
	engine.Store
	loads int
}

func (c *countingLoads) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	c.loads++
	return c.Store.Load(ctx, session)
}

// TestToolUseIDsGivenTwice: a server that numbers a turn's calls alike
// (call_0, call_0) gets both run, the second under an id of its own, and
// no bad_decision error blaming a decision nobody made.
func TestToolUseIDsGivenTwice(t *testing.T) {
	m := callsThenSummary(use("call_0", "get_weather", `{"city":"Oslo"}`), use("call_0", "get_weather", `{"city":"Rome"}`))
	w := recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}, Tools: []engine.Tool{weatherTool()}})
	h := setup(t, w, m, engine.Options{})
	h.send("Oslo and Rome?")
	h.waitIdle()
	if n := h.count(engine.EventError, ""); n != 0 {
		t.Errorf("%d error events", n)
	}
	ids := map[string]bool{}
	for _, f := range h.seen {
		if f.Type == engine.EventToolFinished {
			var fin engine.ToolFinishedEvent
			if err := json.Unmarshal(f.Raw, &fin); err != nil {
				t.Fatal(err)
			}
			ids[fin.ID] = true
		}
	}
	if len(ids) != 2 || !ids["call_0"] {
		t.Errorf("calls settled: %v, want call_0 and another", ids)
	}
}
