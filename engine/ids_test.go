package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
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

// TestToolUsesTheProvidersRefuse: a tool use whose id or name a provider's
// API refuses in a transcript (a model served by another provider, a
// server of one's own) does not end the chat. An id such as
// "functions.get_weather:0" gets one of the session's, shared by the tool
// use and its tool message; a name no tool can have, or none at all,
// settles unknown_tool as a name not declared does, with no bad_decision
// (a nameless call was refused, and stayed open in the transcript). The
// adapters send such a name under model.InvalidToolName.
func TestToolUsesTheProvidersRefuse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		use      model.ToolUse
		wantCode string // the call's
		wantText string // in its error
	}{
		{"an id with a dot and a colon", use("functions.get_weather:0", "get_weather", `{"city":"Tokyo"}`), "", ""},
		{"an id past 40 bytes", use("portkey-"+strings.Repeat("c", 33), "get_weather", `{"city":"Tokyo"}`), "", ""},
		{"a name with a dot", use("call_1", "functions.get_weather", `{"city":"Oslo"}`), "unknown_tool", `There is no tool named "functions.get_weather"`},
		{"no name", use("call_1", "", `{"city":"Oslo"}`), "unknown_tool", "The call names no tool. Use one of the declared tools: get_weather."},
	} {
		for _, viaJSON := range []bool{false, true} {
			name := tc.name + ", a worker in the process"
			if viaJSON {
				name = tc.name + ", its decisions as JSON (an HTTP worker's)"
			}
			t.Run(name, func(t *testing.T) { providersRefuse(t, tc.use, tc.wantCode, tc.wantText, viaJSON) })
		}
	}
}

func providersRefuse(t *testing.T, use model.ToolUse, wantCode, wantText string, viaJSON bool) {
	m := callsThenSummary(use)
	w := recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}, Tools: []engine.Tool{weatherTool()}})
	if viaJSON {
		// What an HTTP worker returns, proposed among it, is decoded.
		decide, execute := w.decide, w.execute
		asJSON := func(d engine.Decision, err error) (engine.Decision, error) {
			if err != nil {
				return d, err
			}
			b, err := json.Marshal(d)
			if err != nil {
				return d, err
			}
			var back engine.Decision
			return back, json.Unmarshal(b, &back)
		}
		w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			return asJSON(decide(ctx, req))
		}
		w.execute = func(ctx context.Context, x engine.ToolExecute, p engine.Decision) (engine.Decision, error) {
			return asJSON(execute(ctx, x, p))
		}
	}
	h := setup(t, w, m, engine.Options{})
	h.send("Oslo?")
	h.waitIdle()
	if n := h.count(engine.EventError, ""); n != 0 {
		t.Errorf("%d error events", n)
	}
	tr := h.transcript()
	checkWhole(t, tr)
	if len(tr) != 4 || len(tr[1].ToolUses) != 1 {
		t.Fatalf("transcript %+v; want the message, the call, its result, the summary", tr)
	}
	id := tr[1].ToolUses[0].ID
	if !model.WireID(id) {
		t.Errorf("the transcript's tool use has the id %q, which the providers refuse", id)
	}
	i := slices.IndexFunc(h.seen, func(f frame) bool { return f.Type == engine.EventToolFinished })
	if i < 0 {
		t.Fatalf("no tool.finished; seen %s", h.types())
	}
	if fin := h.seen[i]; fin.ID != id || fin.Code != wantCode || !strings.Contains(fin.Error, wantText) {
		t.Errorf("tool.finished for %q, code %q, error %q; want %q, %q, %q", fin.ID, fin.Code, fin.Error, id, wantCode, wantText)
	}
}
