package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
)

// TestAGUIEarlierErrorEndsNoLaterRun: a run that ended with RUN_ERROR (a
// guard) leaves the session's error after the app's last gw<seq>, where the
// next message's run starts its replay: that error is the earlier run's,
// and does not end the new one, whose answer comes. Else the app never got
// a newer gw<seq>, and every later run replayed the error (the round's
// review).
func TestAGUIEarlierErrorEndsNoLaterRun(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{Limits: engine.Limits{MaxModelTurns: 1}}})
	b := h.newBrowser(nil)
	tools := []any{map[string]any{"name": "get_local_time", "description": ""}}
	run := func(id string, msgs []any) []map[string]any {
		events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-g", "runId": id, "tools": tools, "messages": msgs}, nil))
		return events
	}
	user := map[string]any{"id": "u1", "role": "user", "content": "both"}
	events := run("r1", []any{user})
	parent := find(events, "TOOL_CALL_START", "toolCallId", "call_time")[0]["parentMessageId"]
	asst := map[string]any{"id": parent, "role": "assistant", "toolCalls": []any{
		map[string]any{"id": "call_weather", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": "{}"}},
		map[string]any{"id": "call_time", "type": "function", "function": map[string]any{"name": "get_local_time", "arguments": "{}"}},
	}}
	weather := map[string]any{"id": find(events, "TOOL_CALL_RESULT", "", nil)[0]["messageId"], "role": "tool", "toolCallId": "call_weather", "content": "It's clear in Tokyo."}
	msgs := []any{user, asst, weather, map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_time", "content": `{"time":"1"}`}}
	if events := run("r2", msgs); events[len(events)-1]["type"] != "RUN_ERROR" {
		t.Fatalf("run 2, past the one model turn a message may take: %v, want RUN_ERROR", events)
	}
	for i, text := range []string{"hello", "hello again"} {
		msgs = append(msgs, map[string]any{"id": fmt.Sprintf("u%d", i+2), "role": "user", "content": text})
		events := run(fmt.Sprintf("r%d", i+3), msgs)
		var types []string
		for _, ev := range events {
			types = append(types, fmt.Sprint(ev["type"]))
		}
		if last := events[len(events)-1]; last["type"] != "RUN_FINISHED" || len(find(events, "TEXT_MESSAGE_CONTENT", "", nil)) == 0 {
			t.Errorf("the run of %q: %s, want the message's answer and RUN_FINISHED", text, strings.Join(types, " "))
		}
	}
}
