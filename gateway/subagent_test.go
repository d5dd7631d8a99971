package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
)

// TestSubagentClientCallOverWebSocket: a sub-agent's client call reaches the
// page that declared the tool in an ordinary tool.call frame (naming its
// parent), the page's answer over the socket settles it once, and the
// sub-agent's answer settles the call it was delegated.
func TestSubagentClientCallOverWebSocket(t *testing.T) {
	localTime := engine.AgentTool{Name: "get_local_time", Handler: engine.HandlerClient,
		Output: engine.Schema(`{"type": "object", "required": ["time"]}`)}
	worker := &engine.ToolWorker{
		Agent: engine.AgentConfig{Model: "main"},
		Tools: []engine.Tool{{Name: "ask_helper", Agent: &engine.AgentConfig{Model: "helper", Tools: []engine.AgentTool{localTime}}}},
	}
	// main calls ask_helper; helper calls get_local_time; both then say
	// what their tools returned.
	models := model.ResolverFunc(func(id string) (model.Model, error) {
		return model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role == model.RoleTool {
				onDelta(id + " saw: " + last.Content)
				return model.Response{Text: id + " saw: " + last.Content, StopReason: model.StopEndTurn}, nil
			}
			use := model.ToolUse{ID: "call_ask", Name: "ask_helper", Arguments: `{"q":"time"}`}
			if id == "helper" {
				use = model.ToolUse{ID: "call_time", Name: "get_local_time", Arguments: `{}`}
			}
			return model.Response{ToolUses: []model.ToolUse{use}, StopReason: model.StopToolUse}, nil
		}), nil
	})
	h := &harness{t: t, logs: newLogSink(), gate: make(chan struct{})}
	logger := slog.New(h.logs)
	eng, err := engine.New(engine.Options{Worker: worker, Models: models, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h.eng = eng
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		_ = eng.Close(ctx)
	})
	h.gw, err = gateway.New(gateway.Options{Engine: eng, Logger: logger, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(h.gw.Handler())
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		_ = h.gw.Shutdown(ctx)
	})

	c, id := h.newBrowser(nil).open([]string{"get_local_time"})
	c.say("what time is it, helper?")
	call := c.untilCall("call_time")
	var parent struct{ Parent string }
	_ = json.Unmarshal(call.raw, &parent)
	if call.Name != "get_local_time" || parent.Parent != "call_ask" {
		t.Fatalf("tool.call %s, want get_local_time with parent call_ask", call)
	}
	c.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
	if got, want := c.idleReply(), `main saw: helper saw: {"time":"12:00"}`; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	c.answer("call_time", call.Attempt, map[string]string{"time": "13:00"})
	if f := c.untilError(); f.Code != "settled" {
		t.Errorf("a second answer: %s, want code settled", f)
	}
	// The session's transcript is main's alone; the helper's events are in
	// the stream with parent.
	if tr := h.transcript(id); len(tr) != 4 || strings.Contains(tr[1].Content, "helper") {
		t.Errorf("transcript %+v, want main's four messages", tr)
	}
	if n := c.count(func(f frame) bool { return strings.Contains(string(f.raw), `"parent":"call_ask"`) }); n == 0 {
		t.Errorf("no event with parent call_ask reached the page: %v", c.frames)
	}
}
