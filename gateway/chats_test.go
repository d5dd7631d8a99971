package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
)

// The HTTP front ends (chats.go, aisdk/, agui/) over real HTTP: the AI
// SDK's UI message stream and AG-UI. integrations/test/ drives the same
// routes with the real npm clients.

// post sends body as JSON (a string is sent as it is) with the browser's
// cookies and returns the response; the caller reads and closes it.
func (b *browser) post(path string, body any, header http.Header) *http.Response {
	b.h.t.Helper()
	raw, ok := body.(string)
	if !ok {
		bs, err := json.Marshal(body)
		if err != nil {
			b.h.t.Fatal(err)
		}
		raw = string(bs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	b.h.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.h.srv.URL+path, strings.NewReader(raw))
	if err != nil {
		b.h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.h.t.Fatal(err)
	}
	return resp
}

// get GETs path with the browser's cookies and header; the caller reads
// and closes the response.
func (b *browser) get(path string, header http.Header) *http.Response {
	b.h.t.Helper()
	return b.request(http.MethodGet, path, header)
}

// request sends a request of method, with no body, with the browser's
// cookies and header.
func (b *browser) request(method, path string, header http.Header) *http.Response {
	b.h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	b.h.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, method, b.h.srv.URL+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.h.t.Fatal(err)
	}
	return resp
}

// sse reads a server-sent events body to its end: the JSON of each data
// line, and whether the AI SDK's [DONE] ended it.
func sse(t *testing.T, resp *http.Response) (events []map[string]any, done bool) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %s: %s", resp.Status, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("a data line is not JSON: %q", data)
		}
		events = append(events, ev)
	}
	return events, done
}

// find returns the events of type typ with field key == value (any value
// when key is "").
func find(events []map[string]any, typ, key string, value any) []map[string]any {
	var out []map[string]any
	for _, ev := range events {
		if ev["type"] == typ && (key == "" || ev[key] == value) {
			out = append(out, ev)
		}
	}
	return out
}

func userMessage(chat, text string) map[string]any {
	return map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{
		map[string]any{"id": fmt.Sprintf("u%d", messageIDs.Add(1)), "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}},
	}}
}

// messageIDs mints user messages' ids, each new as useChat's are.
var messageIDs atomic.Int64

// withOutputs is the follow-up a useChat app posts after addToolOutput:
// the user's message and the assistant's, whose tool parts carry outputs.
func withOutputs(chat, text string, metadata any, parts ...any) map[string]any {
	req := userMessage(chat, text)
	req["messages"] = append(req["messages"].([]any), map[string]any{"id": "a1", "role": "assistant", "metadata": metadata, "parts": parts})
	return req
}

func TestAISDKTurnWithWorkerAndClientTools(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)

	resp := b.post(gateway.RouteAISDK, userMessage("chat-1", "both"), nil)
	if got := resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream"); got != "v1" {
		t.Errorf("x-vercel-ai-ui-message-stream = %q, want v1", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	events, done := sse(t, resp)
	if !done || events[0]["type"] != "start" || events[len(events)-1]["type"] != "finish" {
		t.Fatalf("want start ... finish [DONE], got %v (done %v)", events, done)
	}
	if got := events[len(events)-1]["finishReason"]; got != "tool-calls" {
		t.Errorf("finishReason = %v, want tool-calls: the stream ends with the client tool pending", got)
	}
	weather := find(events, "tool-input-available", "toolCallId", "call_weather")
	clientCall := find(events, "tool-input-available", "toolCallId", "call_time")
	if len(weather) != 1 || weather[0]["providerExecuted"] != true {
		t.Errorf("get_weather's input: %v, want one, providerExecuted (the server runs it)", weather)
	}
	if len(clientCall) != 1 || clientCall[0]["providerExecuted"] != false {
		t.Fatalf("get_local_time's input: %v, want one, not providerExecuted (the app runs it)", clientCall)
	}
	if out := find(events, "tool-output-available", "toolCallId", "call_weather"); len(out) != 1 || out[0]["output"] != "It's clear in Tokyo." {
		t.Errorf("get_weather's output: %v", out)
	}
	if out := find(events, "tool-output-available", "toolCallId", "call_time"); len(out) != 0 {
		t.Errorf("the pending client call has an output: %v", out)
	}
	meta := events[len(events)-1]["messageMetadata"]

	// The app answers: addToolOutput's follow-up.
	answer := withOutputs("chat-1", "both", meta,
		map[string]any{"type": "step-start"},
		map[string]any{"type": "tool-get_weather", "toolCallId": "call_weather", "state": "output-available", "output": "It's clear in Tokyo.", "providerExecuted": true},
		map[string]any{"type": "tool-get_local_time", "toolCallId": "call_time", "state": "output-available", "output": map[string]any{"time": "12:00"}},
	)
	events, done = sse(t, b.post(gateway.RouteAISDK, answer, nil))
	if !done || events[len(events)-1]["finishReason"] != "stop" {
		t.Fatalf("the follow-up did not finish: %v", events)
	}
	if out := find(events, "tool-output-available", "toolCallId", "call_time"); len(out) != 1 {
		t.Errorf("the client call's outcome: %v, want one tool-output-available", out)
	}
	var text strings.Builder
	for _, d := range find(events, "text-delta", "", nil) {
		text.WriteString(d["delta"].(string))
	}
	if want := `got: It's clear in Tokyo.; {"time":"12:00"}`; text.String() != want {
		t.Errorf("the reply = %q, want %q", text.String(), want)
	}
	if n := len(find(events, "start", "", nil)); n != 1 || events[0]["messageId"] != nil {
		t.Errorf("the follow-up's start: %v, want one, without a messageId (it continues the message)", events[0])
	}

	latest := events[len(events)-1]["messageMetadata"]

	// The same answer again is a duplicate: refused, the call settled once.
	// Posted with the first stream's metadata, it replays what followed.
	events, _ = sse(t, b.post(gateway.RouteAISDK, answer, nil))
	if out := find(events, "tool-output-available", "", nil); len(out) != 1 {
		t.Errorf("the duplicate's stream: %v", events)
	}
	// Posted with the latest, there is nothing new: it finishes at once.
	answer["messages"].([]any)[1].(map[string]any)["metadata"] = latest
	events, done = sse(t, b.post(gateway.RouteAISDK, answer, nil))
	if !done || len(events) != 2 || events[1]["finishReason"] != "stop" {
		t.Errorf("the duplicate with nothing new: %v (done %v), want start, finish", events, done)
	}
	id := sessionOf(t, meta)
	tools := 0
	for _, m := range h.transcript(id) {
		if m.Role == "tool" && m.ToolUseID == "call_time" {
			tools++
		}
	}
	if tools != 1 {
		t.Errorf("call_time has %d outcomes in the transcript, want 1", tools)
	}
}

// sessionOf reads the session id from the gateway's message metadata.
func sessionOf(t *testing.T, meta any) string {
	t.Helper()
	m, _ := meta.(map[string]any)
	g, _ := m["gateway"].(map[string]any)
	id, _ := g["session"].(string)
	if id == "" {
		t.Fatalf("no session in the metadata %v", meta)
	}
	return id
}

func TestAISDKClientCallTimesOut(t *testing.T) {
	h := newHarness(t, harnessOptions{fakeClock: true})
	b := h.newBrowser(nil)

	events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-once", "once"), nil))
	if len(find(events, "tool-input-available", "toolCallId", "call_once")) != 1 {
		t.Fatalf("no client call: %v", events)
	}
	meta := events[len(events)-1]["messageMetadata"]
	id := sessionOf(t, meta)
	// The attempt's 5s pass with no answer: the call settles, timeout.
	h.clock.Advance(6 * time.Second)
	waitFor(t, "the call to settle", func() bool {
		for _, m := range h.transcript(id) {
			if m.Role == "tool" && m.ToolUseID == "call_once" {
				return true
			}
		}
		return false
	})

	late := withOutputs("chat-once", "once", meta,
		map[string]any{"type": "tool-once", "toolCallId": "call_once", "state": "output-available", "output": "late"})
	events, done := sse(t, b.post(gateway.RouteAISDK, late, nil))
	if !done {
		t.Fatalf("the follow-up did not end: %v", events)
	}
	failed := find(events, "tool-output-error", "toolCallId", "call_once")
	if len(failed) != 1 || !strings.Contains(failed[0]["errorText"].(string), "once timed out") {
		t.Fatalf("want the timeout as tool-output-error, got %v", events)
	}
	if out := find(events, "tool-output-available", "", nil); len(out) != 0 {
		t.Errorf("the late output counted: %v", out)
	}
}

// A client call whose arguments the engine refused is settled by the
// gateway with its proposed error: the app is told so, consistently, and
// runs nothing (providerExecuted on the input's error and on the output's).
func TestAISDKBadInputOfAClientCall(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	events, done := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-bad", "bad time"), nil))
	if !done || events[len(events)-1]["finishReason"] != "stop" {
		t.Fatalf("the stream: %v, want it to end with the model's reply", events)
	}
	in := find(events, "tool-input-error", "toolCallId", "call_bad_time")
	out := find(events, "tool-output-error", "toolCallId", "call_bad_time")
	if len(in) != 1 || len(out) != 1 {
		t.Fatalf("want one tool-input-error and one tool-output-error for the call, got %v", events)
	}
	start := find(events, "tool-input-start", "toolCallId", "call_bad_time")
	if len(start) != 1 || start[0]["providerExecuted"] != true || in[0]["providerExecuted"] != true || out[0]["providerExecuted"] != true {
		t.Errorf("providerExecuted: the input's start %v, its error %v, the output's %v; want all true (the gateway settled it)", start, in[0]["providerExecuted"], out[0]["providerExecuted"])
	}
	if avail := find(events, "tool-input-available", "toolCallId", "call_bad_time"); len(avail) != 0 {
		t.Errorf("the app was asked to run it: %v", avail)
	}
}

// TestAISDKResume: a reload resumes the response in progress, from its
// user message, whether the session keeps that message in memory or the
// replay reads it from the store (ReplayBytes 1), after earlier turns.
func TestAISDKResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int
	}{{"kept in memory", 0}, {"read from the store", 1}, {"the response kept, the chat's start not", 2500}} {
		t.Run(tc.name, func(t *testing.T) { aisdkResume(t, tc.keep) })
	}
}

func aisdkResume(t *testing.T, keep int) {
	h := newHarness(t, harnessOptions{engine: engine.Options{ReplayBytes: keep}})
	b := h.newBrowser(nil)
	stream := gateway.RouteAISDK + "/chat-r/stream"

	// A chat's answers are the browser's own: a shared cache (a CDN) that
	// kept one would give it to the next browser asking for the URL.
	if resp := b.get(stream, nil); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("resume of a chat never posted: %s, Cache-Control %q; want 204, no-store", resp.Status, resp.Header.Get("Cache-Control"))
	}
	for i := range 3 {
		if events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-r", fmt.Sprintf("hello %d", i)), nil)); events[len(events)-1]["finishReason"] != "stop" {
			t.Fatalf("turn %d: %v", i, events)
		}
	}
	if resp := b.get(stream, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("resume of an idle chat: %s, want 204", resp.Status)
	}
	first, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-r", "time"), nil))
	// The response waits on the client call: a reload resumes it, from the
	// user's message, and the call is delivered to the resumed page.
	resumed := b.get(stream, nil)
	if cc := resumed.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the resumed stream's Cache-Control: %q, want no-store", cc)
	}
	events, done := sse(t, resumed)
	if !done || events[0]["type"] != "start" || events[0]["messageId"] != first[0]["messageId"] {
		t.Fatalf("the resumed stream: %v, want it to start as the first did (%v)", events, first[0])
	}
	if in := find(events, "tool-input-available", "toolCallId", "call_time"); len(in) != 1 || in[0]["providerExecuted"] != false {
		t.Errorf("the resumed page does not run the pending call: %v", events)
	}
	// Another browser cannot resume it: to it the chat does not exist.
	if resp := h.newBrowser(nil).get(stream, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("another browser's resume: %s, want 204", resp.Status)
	}

	meta := events[len(events)-1]["messageMetadata"]
	answer := withOutputs("chat-r", "time", meta,
		map[string]any{"type": "tool-get_local_time", "toolCallId": "call_time", "state": "output-available", "output": map[string]any{"time": "9:00"}})
	if events, _ := sse(t, b.post(gateway.RouteAISDK, answer, nil)); events[len(events)-1]["finishReason"] != "stop" {
		t.Fatalf("the answer's stream: %v", events)
	}
	if resp := b.get(stream, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("resume of a finished response: %s, want 204", resp.Status)
	}
}

func TestChatRequestsRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{ChatBodyLimit: 8192}})
	b := h.newBrowser(nil)
	tooMany := make([]map[string]any, 129)
	for i := range tooMany {
		tooMany[i] = map[string]any{"name": fmt.Sprintf("t%d", i), "description": ""}
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		header http.Header
		status int
		want   string
	}{
		{"AI SDK: not JSON", gateway.RouteAISDK, "{", nil, 400, "not a chat request"},
		{"AI SDK: no chat id", gateway.RouteAISDK, map[string]any{"messages": []any{map[string]any{"role": "user"}}}, nil, 400, "id is empty"},
		{"AI SDK: no messages", gateway.RouteAISDK, map[string]any{"id": "c"}, nil, 400, "no messages"},
		{"AI SDK: regenerate", gateway.RouteAISDK, map[string]any{"id": "c", "trigger": "regenerate-message", "messages": []any{map[string]any{"role": "user"}}}, nil, 400, "regenerate is not supported"},
		{"AI SDK: a system message last", gateway.RouteAISDK, map[string]any{"id": "c", "messages": []any{map[string]any{"role": "system"}}}, nil, 400, `role is "system"`},
		{"AI SDK: a user message without text", gateway.RouteAISDK, map[string]any{"id": "c", "messages": []any{map[string]any{"role": "user", "parts": []any{}}}}, nil, 400, "has no text"},
		{"AI SDK: outputs for a chat never opened", gateway.RouteAISDK, withOutputs("nope", "x", nil), nil, 404, `no chat "nope" for this browser`},
		{"AI SDK: too large", gateway.RouteAISDK, userMessage("c", strings.Repeat("x", 9000)), nil, 413, "over 8192 bytes"},
		{"AI SDK: another site's page", gateway.RouteAISDK, userMessage("c", "hi"), http.Header{"Origin": {"https://evil.example"}}, 403, "pages of evil.example may not"},
		{"AG-UI: not JSON", gateway.RouteAGUI, "[", nil, 400, "not a RunAgentInput"},
		{"AG-UI: no threadId", gateway.RouteAGUI, map[string]any{"runId": "r", "messages": []any{}}, nil, 400, "threadId is empty"},
		{"AG-UI: no runId", gateway.RouteAGUI, map[string]any{"threadId": "t", "messages": []any{}}, nil, 400, "runId is empty"},
		{"AG-UI: a user message without text", gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": ""}}}, nil, 400, "has no text"},
		{"AG-UI: too many tools", gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "tools": tooMany[:129], "messages": []any{map[string]any{"id": "1", "role": "user", "content": "hi"}}}, nil, 413, "129 tools declared, at most 128"},
		{"AI SDK: a user message of white space", gateway.RouteAISDK, userMessage("c", " \n\t "), nil, 400, "only white space"},
		{"AI SDK: something after the JSON", gateway.RouteAISDK, `{"id":"c","messages":[]} xx`, nil, 400, "something follows the JSON value"},
		{"AI SDK: JSON-seq is not JSON", gateway.RouteAISDK, userMessage("c", "hi"), http.Header{"Content-Type": {"application/json-seq"}}, 415, "must be application/json"},
		{"AG-UI: a user message of white space", gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": " \n\t "}}}, nil, 400, "only white space"},
		{"AG-UI: a role AG-UI does not have", gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "bogus", "content": "hi"}}}, nil, 400, `messages[0]'s role is "bogus"`},
		{"AG-UI: a tool result for a thread never opened", gateway.RouteAGUI, map[string]any{"threadId": "t2", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "tool", "toolCallId": "call_time", "content": "x"}}}, nil, 404, `no chat "t2" for this browser`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.post(tc.path, tc.body, tc.header)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %s %q, want %d and %q", resp.Status, body, tc.status, tc.want)
			}
		})
	}
}

// TestChatMediaTypeAnyCase: the body's media type is read in any case,
// parameters aside (it was a case-sensitive prefix: APPLICATION/JSON was
// refused, application/json-seq taken).
func TestChatMediaTypeAnyCase(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	events, done := sse(t, b.post(gateway.RouteAISDK, userMessage("c", "hello"), http.Header{"Content-Type": {"APPLICATION/JSON; charset=UTF-8"}}))
	if !done || len(find(events, "finish", "", nil)) != 1 {
		t.Errorf("a chat posted as APPLICATION/JSON: %v", events)
	}
}

// TestAGUIEmptyRunOnANewThread: a run with no messages on a thread this
// browser has not begun is RUN_STARTED, RUN_FINISHED, as on one it has
// (it was 404), and opens no session.
func TestAGUIEmptyRunOnANewThread(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	for _, body := range []map[string]any{
		{"threadId": "new-thread", "runId": "r1"},
		{"threadId": "new-thread", "runId": "r2", "messages": []any{}},
	} {
		events, _ := sse(t, b.post(gateway.RouteAGUI, body, nil))
		var types []string
		for _, ev := range events {
			types = append(types, fmt.Sprint(ev["type"]))
		}
		if got := strings.Join(types, " "); got != "RUN_STARTED RUN_FINISHED" {
			t.Errorf("run %v: %s, want RUN_STARTED RUN_FINISHED", body["runId"], got)
		}
	}
	if n := h.eng.Loaded(); n != 0 {
		t.Errorf("%d sessions in memory after the empty runs, want none", n)
	}
}

func TestAGUIRunWithFrontEndTool(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	tools := []any{map[string]any{"name": "get_local_time", "description": "the time"}}
	user := map[string]any{"id": "u1", "role": "user", "content": "both"}
	events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": "r1", "tools": tools, "messages": []any{user}}, nil))
	var types []string
	for _, ev := range events {
		types = append(types, ev["type"].(string))
	}
	want := "RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT RUN_FINISHED"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if r := find(events, "TOOL_CALL_RESULT", "toolCallId", "call_weather"); len(r) != 1 || r[0]["content"] != "It's clear in Tokyo." {
		t.Errorf("the worker's result: %v", r)
	}
	fin := events[len(events)-1]
	if out, _ := fin["outcome"].(map[string]any); fmt.Sprint(out["pendingToolCallIds"]) != "[call_time]" {
		t.Errorf("RUN_FINISHED = %v, want the front-end call pending", fin)
	}
	parent := find(events, "TOOL_CALL_START", "toolCallId", "call_time")[0]["parentMessageId"]

	// The next run carries the front end's result.
	msgs := []any{user,
		map[string]any{"id": parent, "role": "assistant", "toolCalls": []any{
			map[string]any{"id": "call_weather", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": "{}"}},
			map[string]any{"id": "call_time", "type": "function", "function": map[string]any{"name": "get_local_time", "arguments": "{}"}},
		}},
		map[string]any{"id": find(events, "TOOL_CALL_RESULT", "", nil)[0]["messageId"], "role": "tool", "toolCallId": "call_weather", "content": "It's clear in Tokyo."},
		map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_time", "content": `{"time":"12:00"}`},
	}
	events, _ = sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": "r2", "tools": tools, "messages": msgs}, nil))
	var text strings.Builder
	for _, ev := range find(events, "TEXT_MESSAGE_CONTENT", "", nil) {
		text.WriteString(ev["delta"].(string))
	}
	if want := `got: It's clear in Tokyo.; {"time":"12:00"}`; text.String() != want {
		t.Errorf("reply %q, want %q (events %v)", text.String(), want, events)
	}
	if events[len(events)-1]["type"] != "RUN_FINISHED" || len(find(events, "TOOL_CALL_RESULT", "", nil)) != 0 {
		t.Errorf("second run: %v", events)
	}
}

// TestAGUIShowsAnOutcomeNotItsOwn: a front end's tool message that the call
// took but that settled it otherwise (its result fails the tool's output
// schema: invalid_output) is shown as the call's TOOL_CALL_RESULT in that
// run, as in a duplicate of it; only an outcome the message itself holds
// is not. The run hid it, where its duplicate showed it.
func TestAGUIShowsAnOutcomeNotItsOwn(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	tools := []any{map[string]any{"name": "get_local_time", "description": "the time"}}
	user := map[string]any{"id": "u1", "role": "user", "content": "time"}
	events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": "r1", "tools": tools, "messages": []any{user}}, nil))
	start := find(events, "TOOL_CALL_START", "toolCallId", "call_time")
	if len(start) != 1 {
		t.Fatalf("the first run: %v", events)
	}
	msgs := []any{user,
		map[string]any{"id": start[0]["parentMessageId"], "role": "assistant", "toolCalls": []any{
			map[string]any{"id": "call_time", "type": "function", "function": map[string]any{"name": "get_local_time", "arguments": "{}"}},
		}},
		map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_time", "content": "plain words, not JSON"},
	}
	for _, run := range []string{"r2", "r2 again"} {
		events, _ = sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": run, "tools": tools, "messages": msgs}, nil))
		results := find(events, "TOOL_CALL_RESULT", "toolCallId", "call_time")
		if len(results) != 1 || !strings.Contains(fmt.Sprint(results[0]["content"]), "output") {
			t.Errorf("run %s: TOOL_CALL_RESULT %v, want the call's invalid_output error (events %v)", run, results, events)
		}
	}
}

// TestAISDKStartNamesTheMessageWhateverComesFirst: a new message's response
// starts with the id its resume will use (msg_<session>_<seq>), even when
// a worker's client.event on the message's trigger comes before the user
// message's event: its data part follows the start. The start had no id,
// the client made its own, and a resume added a second assistant message.
func TestAISDKStartNamesTheMessageWhateverComesFirst(t *testing.T) {
	h := newHarness(t, harnessOptions{
		worker: func(w engine.Worker) engine.Worker {
			return engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				d, err := w.Decide(ctx, req)
				if u, ok := req.Trigger.(engine.UserMessage); ok && u.Message.Content == "confetti" {
					d.Actions = append([]engine.Action{engine.ClientEvent{Name: "confetti", Data: json.RawMessage(`{"n":3}`)}}, d.Actions...)
				}
				return d, err
			})
		},
	})
	b := h.newBrowser(nil)
	events, done := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-c", "confetti"), nil))
	if !done || len(events) < 2 || events[0]["type"] != "start" {
		t.Fatalf("events %v", events)
	}
	id, _ := events[0]["messageId"].(string)
	if !strings.HasPrefix(id, "msg_") {
		t.Errorf("start = %v, want the message's id, msg_<session>_<seq>", events[0])
	}
	if data := find(events, "data-confetti", "", nil); len(data) != 1 || fmt.Sprint(data[0]["data"]) != "map[n:3]" {
		t.Errorf("the client.event's part: %v (events %v)", data, events)
	}
}

// TestAISDKAnswerCountsForTheCurrentAttempt: the app's output arrives after
// the first attempt timed out and the retry waits for a page: it answers
// the retry, and the call settles once, with it.
func TestAISDKAnswerCountsForTheCurrentAttempt(t *testing.T) {
	h := newHarness(t, harnessOptions{fakeClock: true})
	b := h.newBrowser(nil)

	events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-flaky", "flaky"), nil))
	in := find(events, "tool-input-available", "toolCallId", "call_flaky")
	if len(in) != 1 {
		t.Fatalf("no client call: %v", events)
	}
	if md := fmt.Sprint(in[0]["providerMetadata"]); !strings.Contains(md, "attempt:1") {
		t.Errorf("providerMetadata = %s, want attempt 1", md)
	}
	meta := events[len(events)-1]["messageMetadata"]
	id := sessionOf(t, meta)
	h.clock.Advance(6 * time.Second) // attempt 1's 5s pass
	waitFor(t, "the retry", func() bool { return hasEvent(t, h, id, `"type":"tool.retrying"`) })
	h.clock.Advance(time.Millisecond) // its backoff (none): attempt 2 starts and waits for a page
	waitFor(t, "attempt 2", func() bool { return hasEvent(t, h, id, `"type":"tool.started"`, `"attempt":2`) })

	answer := withOutputs("chat-flaky", "flaky", meta,
		map[string]any{"type": "tool-flaky", "toolCallId": "call_flaky", "state": "output-available", "output": "done"})
	events, _ = sse(t, b.post(gateway.RouteAISDK, answer, nil))
	if out := find(events, "tool-output-available", "toolCallId", "call_flaky"); len(out) != 1 || out[0]["output"] != "done" {
		t.Fatalf("the retried call's outcome: %v", events)
	}
	if n := len(find(events, "tool-output-error", "", nil)); n != 0 {
		t.Errorf("the timed-out attempt showed as a failure: %v", events)
	}
}

// hasEvent reports whether the session's log has an event whose frame
// contains every part.
func hasEvent(t *testing.T, h *harness, id string, parts ...string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	s := h.session(id)
	page, err := s.Attach(ctx, engine.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer page.Detach()
	for _, ev := range page.Take(nil) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(string(ev.Frame), p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSessionErrorsEndTheRequest: a guard that stops the agent ends the AI
// SDK's request with an error chunk (the chat's error) and the AG-UI run
// with RUN_ERROR, saying why.
func TestSessionErrorsEndTheRequest(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{Limits: engine.Limits{MaxModelTurns: 1}}})
	b := h.newBrowser(nil)
	// "both": the worker's call runs, the client's is answered, and the
	// model's second turn is one too many.
	events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-g", "both"), nil))
	meta := events[len(events)-1]["messageMetadata"]
	answer := withOutputs("chat-g", "both", meta,
		map[string]any{"type": "tool-get_local_time", "toolCallId": "call_time", "state": "output-available", "output": map[string]any{"time": "1"}})
	events, done := sse(t, b.post(gateway.RouteAISDK, answer, nil))
	last := events[len(events)-1]
	if !done || last["type"] != "error" || !strings.Contains(fmt.Sprint(last["errorText"]), "Stopped: the model took 1 turn to answer") {
		t.Errorf("want the guard as the last chunk, an error, then [DONE]; got %v (done %v)", events, done)
	}

	tools := []any{map[string]any{"name": "get_local_time", "description": ""}}
	user := map[string]any{"id": "u1", "role": "user", "content": "both"}
	if events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-g", "runId": "r1", "tools": tools, "messages": []any{user}}, nil)); len(find(events, "TOOL_CALL_END", "toolCallId", "call_time")) != 1 {
		t.Fatalf("the first run: %v", events)
	}
	msgs := []any{user, map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_time", "content": `{"time":"1"}`}}
	events, _ = sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-g", "runId": "r2", "tools": tools, "messages": msgs}, nil))
	last = events[len(events)-1]
	if last["type"] != "RUN_ERROR" || last["code"] != "guard.model_turns" {
		t.Errorf("want RUN_ERROR with the guard's code last; got %v", events)
	}
}

// TestHandoffKeepsANotTwiceCall: a stream that ends with a client call
// pending hands the call to the app, which answers in the next request; for
// a tool declared idempotent: false that is not a page leaving mid-run, so
// the call waits for the answer instead of settling outcome_unknown.
func TestHandoffKeepsANotTwiceCall(t *testing.T) {
	t.Run("aisdk", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		b := h.newBrowser(nil)
		events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-pay", "pay"), nil))
		if events[len(events)-1]["finishReason"] != "tool-calls" || len(find(events, "tool-input-available", "toolCallId", "call_pay")) != 1 {
			t.Fatalf("want the stream to end with pay pending, got %v", events)
		}
		answer := withOutputs("chat-pay", "pay", events[len(events)-1]["messageMetadata"],
			map[string]any{"type": "tool-pay", "toolCallId": "call_pay", "state": "output-available", "output": "paid"})
		events, _ = sse(t, b.post(gateway.RouteAISDK, answer, nil))
		if out := find(events, "tool-output-available", "toolCallId", "call_pay"); len(out) != 1 || out[0]["output"] != "paid" {
			t.Errorf("pay's outcome: %v, want the app's answer (events %v)", out, events)
		}
	})
	t.Run("agui", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		b := h.newBrowser(nil)
		tools := []any{map[string]any{"name": "pay"}}
		user := map[string]any{"id": "u1", "role": "user", "content": "pay"}
		events, _ := sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-pay", "runId": "r1", "tools": tools, "messages": []any{user}}, nil))
		fin := events[len(events)-1]
		if out, _ := fin["outcome"].(map[string]any); fmt.Sprint(out["pendingToolCallIds"]) != "[call_pay]" {
			t.Fatalf("want the run to end with pay pending, got %v", events)
		}
		parent := find(events, "TOOL_CALL_START", "toolCallId", "call_pay")[0]["parentMessageId"]
		msgs := []any{user,
			map[string]any{"id": parent, "role": "assistant", "toolCalls": []any{
				map[string]any{"id": "call_pay", "type": "function", "function": map[string]any{"name": "pay", "arguments": "{}"}},
			}},
			map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_pay", "content": "paid"},
		}
		events, _ = sse(t, b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-pay", "runId": "r2", "tools": tools, "messages": msgs}, nil))
		var text strings.Builder
		for _, ev := range find(events, "TEXT_MESSAGE_CONTENT", "", nil) {
			text.WriteString(ev["delta"].(string))
		}
		if text.String() != "got: paid" {
			t.Errorf("reply %q, want \"got: paid\" (events %v)", text.String(), events)
		}
	})
}

// TestFrontEndsShowACallThatAskedForApproval: the AI SDK's stream asks the
// app to approve a worker's call (its input, then tool-approval-request
// with the digest as the approval's id, and the response ends waiting for
// it: it stayed open until the call timed out, with no part for the app to
// answer); AG-UI does not ask (a page on /ws does), and a call that waited
// for approval and timed out shows there with TOOL_CALL_START, ARGS and END
// before its TOOL_CALL_RESULT (it came alone).
func TestFrontEndsShowACallThatAskedForApproval(t *testing.T) {
	h := newHarness(t, harnessOptions{fakeClock: true})
	b := h.newBrowser(nil)
	// The stream stays open while the call waits; time passes meanwhile.
	read := func(resp *http.Response) []map[string]any {
		t.Helper()
		got := make(chan []map[string]any, 1)
		go func() {
			events, _ := sse(t, resp)
			got <- events
		}()
		var events []map[string]any
		waitFor(t, "the call to time out and the run to end", func() bool {
			select {
			case events = <-got:
				return true
			default:
				h.clock.Advance(time.Second)
				return false
			}
		})
		return events
	}

	events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-del", "delete"), nil))
	in := find(events, "tool-input-available", "toolCallId", "call_delete")
	if len(in) != 1 || fmt.Sprint(in[0]["input"]) != "map[path:notes.txt]" || in[0]["providerExecuted"] != true {
		t.Errorf("the AI SDK's input of the call: %v", in)
	}
	asked := find(events, "tool-approval-request", "toolCallId", "call_delete")
	if len(asked) != 1 || asked[0]["approvalId"] == "" {
		t.Errorf("the AI SDK's stream did not ask the approval: %v", events)
	}
	if last := events[len(events)-1]; last["type"] != "finish" || last["finishReason"] != "tool-calls" {
		t.Errorf("the AI SDK's stream ends %v, want finish with tool-calls: it waits for the app", last)
	}

	user := map[string]any{"id": "u1", "role": "user", "content": "delete"}
	events = read(b.post(gateway.RouteAGUI, map[string]any{"threadId": "th-del", "runId": "r1", "messages": []any{user}}, nil))
	var order []string
	for _, ev := range events {
		if ev["toolCallId"] == "call_delete" {
			order = append(order, fmt.Sprint(ev["type"]))
			if ev["type"] == "TOOL_CALL_ARGS" && ev["delta"] != `{"path":"notes.txt"}` {
				t.Errorf("AG-UI's arguments of the call: %v", ev)
			}
		}
	}
	if got := strings.Join(order, " "); got != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT" {
		t.Errorf("AG-UI's events of the call: %s", got)
	}
}

// TestAISDKCallStartedBeforeTheStream: a follow-up whose assistant message
// leaves a call's tool part out (a hand-made client; useChat always posts
// it) still sees that call with its input, as it started, then its
// outcome: it showed input {}.
func TestAISDKCallStartedBeforeTheStream(t *testing.T) {
	h := newHarness(t, harnessOptions{fakeClock: true})
	b := h.newBrowser(nil)
	events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-w", "once where"), nil))
	if len(find(events, "tool-input-available", "toolCallId", "call_once_where")) != 1 {
		t.Fatalf("no client call: %v", events)
	}
	meta := events[len(events)-1]["messageMetadata"]
	id := sessionOf(t, meta)
	h.clock.Advance(6 * time.Second) // its one attempt times out
	waitFor(t, "the call to settle", func() bool { return hasEvent(t, h, id, `"type":"tool.finished"`) })

	events, _ = sse(t, b.post(gateway.RouteAISDK, withOutputs("chat-w", "once where", meta), nil))
	in := find(events, "tool-input-available", "toolCallId", "call_once_where")
	if len(in) != 1 || fmt.Sprint(in[0]["input"]) != "map[where:here]" {
		t.Errorf("the call's input in the follow-up: %v", in)
	}
	if out := find(events, "tool-output-error", "toolCallId", "call_once_where"); len(out) != 1 {
		t.Errorf("the call's outcome in the follow-up: %v", events)
	}
}

// TestAISDKChatUnreadable: a chat whose journal cannot be read back is
// refused with 500, saying so and what to do, at every request, and the
// operator's log says it once.
func TestAISDKChatUnreadable(t *testing.T) {
	store := &damagedStore{MemoryStore: engine.NewMemoryStore()}
	h := newHarness(t, harnessOptions{engine: engine.Options{Store: store, Unload: 20 * time.Millisecond}})
	b := h.newBrowser(nil)
	if events, _ := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-d", "hello"), nil)); events[len(events)-1]["finishReason"] != "stop" {
		t.Fatalf("the first turn: %v", events)
	}
	sums, err := store.Summaries(context.Background(), "")
	if err != nil || len(sums) != 1 {
		t.Fatalf("summaries %v %v", sums, err)
	}
	id := sums[0].ID
	deadline := time.Now().Add(hang)
	for _, loaded := h.eng.Session(id); loaded; _, loaded = h.eng.Session(id) {
		if time.Now().After(deadline) {
			t.Fatal("the idle chat did not unload")
		}
		time.Sleep(5 * time.Millisecond)
	}
	store.damaged.Store(id)
	for try := 1; try <= 2; try++ {
		resp := b.post(gateway.RouteAISDK, userMessage("chat-d", "again"), nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `chat "chat-d" cannot be opened: the gateway cannot read what it stored of it: start a new chat`) {
			t.Errorf("try %d: %s %s", try, resp.Status, body)
		}
	}
	if n := strings.Count(h.logs.String(), "ERROR a session's journal cannot be read"); n != 1 {
		t.Errorf("%d ERROR lines after two tries, want 1", n)
	}
}
