package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
)

// newSubagentHarness serves an agent "main" whose tool ask_helper is
// delegated to a sub-agent "helper" that calls the page's get_local_time;
// each says what its tool returned.
func newSubagentHarness(t *testing.T) *harness {
	t.Helper()
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

	return h
}

// TestSubagentClientCallOverWebSocket: a sub-agent's client call reaches the
// page that declared the tool in an ordinary tool.call frame (naming its
// parent), the page's answer over the socket settles it once, and the
// sub-agent's answer settles the call it was delegated.
func TestSubagentClientCallOverWebSocket(t *testing.T) {
	h := newSubagentHarness(t)
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

// TestSubagentOverHTTPFrontEnds: a useChat app and an AG-UI front end see
// the session's own agent's turn: the delegated call, and the sub-agent's
// client call to run (the response ends with it pending, though the
// delegated call is still open), never the sub-agent's text; the app's
// answer settles it and the delegated call's result follows.
func TestSubagentOverHTTPFrontEnds(t *testing.T) {
	t.Run("aisdk", func(t *testing.T) {
		h := newSubagentHarness(t)
		b := h.newBrowser(nil)
		events, done := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-sub", "what time is it, helper?"), nil))
		if !done || events[len(events)-1]["finishReason"] != "tool-calls" {
			t.Fatalf("want the stream to end with the sub-agent's client call pending, got %v", events)
		}
		if in := find(events, "tool-input-available", "toolCallId", "call_ask"); len(in) != 1 || in[0]["providerExecuted"] != true {
			t.Errorf("the delegated call: %v, want one, run by the server", in)
		}
		if in := find(events, "tool-input-available", "toolCallId", "call_time"); len(in) != 1 || in[0]["providerExecuted"] != false {
			t.Fatalf("the sub-agent's client call: %v, want one, run by the app", in)
		}
		meta := events[len(events)-1]["messageMetadata"]
		answer := withOutputs("chat-sub", "what time is it, helper?", meta,
			map[string]any{"type": "tool-get_local_time", "toolCallId": "call_time", "state": "output-available", "output": map[string]any{"time": "12:00"}})
		events, done = sse(t, b.post(gateway.RouteAISDK, answer, nil))
		if !done || events[len(events)-1]["finishReason"] != "stop" {
			t.Fatalf("the follow-up did not finish: %v", events)
		}
		if out := find(events, "tool-output-available", "toolCallId", "call_ask"); len(out) != 1 || out[0]["output"] != `helper saw: {"time":"12:00"}` {
			t.Errorf("the delegated call's output: %v", out)
		}
		var text strings.Builder
		for _, d := range find(events, "text-delta", "", nil) {
			text.WriteString(d["delta"].(string))
		}
		if want := `main saw: helper saw: {"time":"12:00"}`; text.String() != want {
			t.Errorf("the reply = %q, want %q: the sub-agent's own text is not the assistant's", text.String(), want)
		}
	})
	t.Run("agui", func(t *testing.T) {
		h := newSubagentHarness(t)
		b := h.newBrowser(nil)
		tools := []any{map[string]any{"name": "get_local_time", "description": "the time"}}
		user := map[string]any{"id": "u1", "role": "user", "content": "what time is it, helper?"}
		events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-sub", "runId": "r1", "tools": tools, "messages": []any{user}}, nil))
		fin := events[len(events)-1]
		if out, _ := fin["outcome"].(map[string]any); fin["type"] != "RUN_FINISHED" || fmt.Sprint(out["pendingToolCallIds"]) != "[call_time]" {
			t.Fatalf("want the run to finish with the sub-agent's call pending, got %v", events)
		}
		if n := len(find(events, "TEXT_MESSAGE_CONTENT", "", nil)); n != 0 {
			t.Errorf("the sub-agent's text reached the front end: %v", events)
		}
		parent := find(events, "TOOL_CALL_START", "toolCallId", "call_ask")[0]["parentMessageId"]
		msgs := []any{user,
			map[string]any{"id": parent, "role": "assistant", "toolCalls": []any{
				map[string]any{"id": "call_ask", "type": "function", "function": map[string]any{"name": "ask_helper", "arguments": "{}"}},
				map[string]any{"id": "call_time", "type": "function", "function": map[string]any{"name": "get_local_time", "arguments": "{}"}},
			}},
			map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_time", "content": `{"time":"12:00"}`},
		}
		events, _ = sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-sub", "runId": "r2", "tools": tools, "messages": msgs}, nil))
		if r := find(events, "TOOL_CALL_RESULT", "toolCallId", "call_ask"); len(r) != 1 || r[0]["content"] != `helper saw: {"time":"12:00"}` {
			t.Errorf("the delegated call's result: %v (events %v)", r, events)
		}
		var text strings.Builder
		for _, ev := range find(events, "TEXT_MESSAGE_CONTENT", "", nil) {
			text.WriteString(ev["delta"].(string))
		}
		if want := `main saw: helper saw: {"time":"12:00"}`; text.String() != want {
			t.Errorf("reply %q, want %q", text.String(), want)
		}
	})
}
