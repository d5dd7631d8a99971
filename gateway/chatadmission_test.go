package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/gateway/aisdk"
	"github.com/clienttools/gateway/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestChatRefusedAtALimitOpensNothing: a front end's request refused for
// its message's size, its tools, or the browser's sessions in memory
// counts as a limit hit, as /ws's refusals do, and a new chat refused for
// its size opens no session (a refused AG-UI run left one in memory for
// good).
func TestChatRefusedAtALimitOpensNothing(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{MaxMessageBytes: 100, MaxLiveSessions: 1, Metrics: m},
		gateway: gateway.Options{Metrics: m},
	})
	b := h.newBrowser(nil)
	tooMany := make([]map[string]any, 129)
	for i := range tooMany {
		tooMany[i] = map[string]any{"name": fmt.Sprintf("t%d", i)}
	}
	long := strings.Repeat("x", 101)
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		want   string
	}{
		{"AI SDK: a message too long", gateway.RouteAISDK, userMessage("c1", long), 413, "the message is 101 bytes, at most 100"},
		{"AG-UI: a message too long", gateway.RouteAGUI, map[string]any{"threadId": "t1", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": long}}}, 413, "the message is 101 bytes, at most 100"},
		{"AG-UI: too many tools", gateway.RouteAGUI, map[string]any{"threadId": "t2", "runId": "r", "tools": tooMany, "messages": []any{map[string]any{"id": "1", "role": "user", "content": "hi"}}}, 413, "129 tools declared, at most 128"},
	} {
		resp := b.post(tc.path, tc.body, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: got %s %q, want %d and %q", tc.name, resp.Status, body, tc.status, tc.want)
		}
		if strings.HasSuffix(string(body), "\n") {
			t.Errorf("%s: the refusal %q ends with a newline, which the AI SDK shows as part of chat.error.message", tc.name, body)
		}
	}
	if n := h.eng.Loaded(); n != 0 {
		t.Errorf("%d sessions in memory after three refused new chats, want 0", n)
	}
	// One chat in memory, the most this browser may have: a second is
	// refused at the engine's limit.
	ok := b.post(gateway.RouteAISDK, userMessage("c2", "hi"), nil)
	_, _ = io.ReadAll(ok.Body)
	ok.Body.Close()
	refused := b.post(gateway.RouteAISDK, userMessage("c3", "hi"), nil)
	body, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second chat in memory: %s %q, want 429", refused.Status, body)
	}
	want := `
# HELP gateway_limits_hit_total Requests refused at one of a browser's limits, by limit.
# TYPE gateway_limits_hit_total counter
gateway_limits_hit_total{limit="limit_exceeded"} 4
# HELP gateway_sessions_opened_total New sessions opened on this node.
# TYPE gateway_sessions_opened_total counter
gateway_sessions_opened_total 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gateway_limits_hit_total", "gateway_sessions_opened_total"); err != nil {
		t.Error(err)
	}
}

// TestChatAdmission: an open stream counts as one of the browser's sockets,
// a new chat as one of its new sessions, /healthz and the metrics count it,
// and Shutdown ends open streams.
func TestChatAdmission(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, harnessOptions{gateway: gateway.Options{MaxSockets: 1, NewSessionsPerMinute: 2, Metrics: m}})
	streams := func() (health, gauge int) {
		t.Helper()
		resp, err := http.Get(h.srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Streams int }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "gateway_http_streams_open "); ok {
				gauge, _ = strconv.Atoi(v)
			}
		}
		return body.Streams, gauge
	}
	b := h.newBrowser(nil)

	// "gated flood" streams, then waits for the gate: the stream stays open.
	open := b.post(gateway.RouteAISDK, userMessage("chat-a", "gated flood"), nil)
	if open.StatusCode != http.StatusOK {
		t.Fatalf("the first stream: %s", open.Status)
	}
	line, err := bufio.NewReader(open.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("the first stream's first line: %q, %v", line, err)
	}
	refused := b.post(gateway.RouteAISDK, userMessage("chat-b", "hi"), nil)
	body, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "streams and sockets open") {
		t.Errorf("a second stream past MaxSockets: %s %q, want 429", refused.Status, body)
	}
	if health, gauge := streams(); health != 1 || gauge != 1 {
		t.Errorf("with one stream open: /healthz streams %d, gateway_http_streams_open %d, want 1 and 1", health, gauge)
	}

	// Shutdown ends the open stream, with an error, not finish: the reply
	// was cut (TestShutdownSaysTheReplyWasCut).
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := h.gw.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	rest, _ := io.ReadAll(open.Body)
	open.Body.Close()
	if strings.Contains(string(rest), `"finish"`) {
		t.Errorf("the stream cut by Shutdown finished: %q", rest)
	}
	close(h.gate)
	if health, gauge := streams(); health != 0 || gauge != 0 {
		t.Errorf("after Shutdown: /healthz streams %d, gateway_http_streams_open %d, want 0 and 0", health, gauge)
	}
}

func TestChatNewSessionRate(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{NewSessionsPerMinute: 1}})
	b := h.newBrowser(nil)
	if events, done := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-1", "hi"), nil)); !done {
		t.Fatalf("the first chat: %v", events)
	}
	// The same chat again is no new session.
	if _, done := sse(t, b.post(gateway.RouteAISDK, userMessage("chat-1", "again"), nil)); !done {
		t.Fatal("the first chat's second message did not stream")
	}
	resp := b.post(gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": "hi"}}}, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "opened 1 sessions in the last minute") {
		t.Errorf("a second new chat in the minute: %s %q, want 429", resp.Status, body)
	}
	// The header says when, as the text does: a client backs off by it.
	_, said, _ := strings.Cut(strings.TrimSpace(string(body)), "try again in ")
	wait, _ := time.ParseDuration(said)
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 || time.Duration(secs)*time.Second != wait {
		t.Errorf("the 429's Retry-After: %q (body %q), want the seconds its text gives", resp.Header.Get("Retry-After"), body)
	}
}

// TestChatCORS: a page of a site in --origins may post with its cookie
// (a preflight, then credentials); another site's page is refused.
func TestChatCORS(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"app.example"}}})
	b := h.newBrowser(nil)
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"https://app.example", http.StatusNoContent},
		{"https://evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodOptions, h.srv.URL+gateway.RouteAISDK, nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type")
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("preflight from %s: %s, want %d", tc.origin, resp.Status, tc.status)
		}
		if tc.status == http.StatusNoContent && (resp.Header.Get("Access-Control-Allow-Origin") != tc.origin ||
			resp.Header.Get("Access-Control-Allow-Credentials") != "true" || resp.Header.Get("Access-Control-Allow-Headers") != "content-type") {
			t.Errorf("preflight headers %v", resp.Header)
		}
	}
	resp := b.post(gateway.RouteAGUI, map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": "hi"}}},
		http.Header{"Origin": {"https://app.example"}})
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Errorf("Access-Control-Allow-Origin = %q", got)
	}
	if events, _ := sse(t, resp); events[len(events)-1]["type"] != "RUN_FINISHED" {
		t.Errorf("the cross-site run: %v", events)
	}
}

// TestSessionListCORS: a page of a site in --origins lists the browser's
// chats with its cookie, and may read the answer; another site's page is
// refused, and given no identity.
func TestSessionListCORS(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"app.example"}}})
	b := h.newBrowser(nil)
	_, id := b.open(nil)
	resp := b.get("/sessions", http.Header{"Origin": {"https://app.example"}})
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	err := json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(list.Sessions) != 1 || list.Sessions[0].ID != id {
		t.Fatalf("the list from an allowed site: %s, %+v (%v); want the browser's chat %s", resp.Status, list, err, id)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("the list from an allowed site may not be read there: %v", resp.Header)
	}

	stranger := h.newBrowser(nil)
	resp = stranger.get("/sessions", http.Header{"Origin": {"https://evil.example"}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "evil.example") {
		t.Errorf("the list from another site: %s %q, want 403 naming it", resp.Status, body)
	}
	if len(resp.Cookies()) != 0 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a refused page was given %v", resp.Header)
	}
}

// TestChatBodyTimeout: a front end's request whose body stops coming is
// answered 408 once ChatBodyTimeout passed, and a second for each 16 KiB
// its Content-Length says (100 bytes: 6 ms), and its connection is not
// held open for ever (a client without a cookie could hold every
// descriptor the gateway has so).
func TestChatBodyTimeout(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{ChatBodyTimeout: 200 * time.Millisecond}})
	for _, route := range []string{gateway.RouteAISDK, gateway.RouteAGUI} {
		c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(hang))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":", route, h.srv.Listener.Addr())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s with a body that stops: no answer: %v", route, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 206ms") {
			t.Errorf("POST %s with a body that stops: %s %q, want 408 naming the time", route, resp.Status, body)
		}
	}
}

// TestShutdownWhileABodyComes: a front end's request whose body is still
// on its way when the gateway shuts down is answered 503 at once: the
// shutdown does not wait the body's minute, which would leave the engine
// no time to unload its sessions.
func TestShutdownWhileABodyComes(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(hang))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":", gateway.RouteAISDK, h.srv.Listener.Addr())
	waitFor(t, "the request is taken", func() bool {
		resp, err := http.Get(h.srv.URL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var health struct{ Streams int }
		return json.NewDecoder(resp.Body).Decode(&health) == nil && health.Streams == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.gw.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown while a body comes: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the request whose body was coming: %s, want 503", resp.Status)
	}
}

// TestShutdownSaysTheReplyWasCut: a stream that Shutdown cuts mid-reply ends
// with its protocol's error saying so, the AI SDK's error chunk and [DONE],
// AG-UI's RUN_ERROR after the open text's end: before, it stopped with no
// end, and both clients took the cut text for the whole reply.
func TestShutdownSaysTheReplyWasCut(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	// midReply reads the stream up to its first piece of text: the reply
	// has begun (the gated flood then waits for the gate).
	midReply := func(resp *http.Response, text string) *bufio.Reader {
		t.Helper()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s", resp.Status)
		}
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended before its text: %v", err)
			}
			if strings.Contains(line, text) {
				return r
			}
		}
	}
	chat := b.post(gateway.RouteAISDK, userMessage("chat-a", "gated flood"), nil)
	chatBody := midReply(chat, `"type":"text-delta"`)
	run := b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": "r1", "messages": []any{map[string]any{"id": "u1", "role": "user", "content": "gated flood"}}}, nil)
	runBody := midReply(run, `"type":"TEXT_MESSAGE_CONTENT"`)

	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := h.gw.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	defer close(h.gate)
	lastData := func(r *bufio.Reader, resp *http.Response) []string {
		t.Helper()
		rest, _ := io.ReadAll(r)
		resp.Body.Close()
		var data []string
		for _, line := range strings.Split(string(rest), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
		if len(data) < 2 {
			t.Fatalf("the cut stream's rest: %q", rest)
		}
		return data[len(data)-2:]
	}
	short := func(data []string) (out []string) {
		for _, d := range data {
			if len(d) > 300 {
				d = d[:100] + "..." + d[len(d)-100:]
			}
			out = append(out, d)
		}
		return out
	}
	var end map[string]any
	if got := lastData(chatBody, chat); got[1] != "[DONE]" || json.Unmarshal([]byte(got[0]), &end) != nil || end["type"] != "error" || end["errorText"] != aisdk.StoppingText {
		t.Errorf("the AI SDK stream cut by Shutdown ends %q; want an error chunk saying the gateway stops, then [DONE]", short(got))
	}
	got := lastData(runBody, run)
	var textEnd map[string]any
	if json.Unmarshal([]byte(got[0]), &textEnd) != nil || textEnd["type"] != "TEXT_MESSAGE_END" || json.Unmarshal([]byte(got[1]), &end) != nil || end["type"] != "RUN_ERROR" || end["code"] != "gateway_stopping" {
		t.Errorf("the AG-UI run cut by Shutdown ends %q; want TEXT_MESSAGE_END, then RUN_ERROR gateway_stopping", short(got))
	}
}

// TestChatRouteWrongMethod: a front end's route asked with a method it does
// not take answers 405 with the methods it does, and, to a page of an
// allowed origin, the CORS headers every answer carries: without them the
// page saw a CORS failure, not the 405.
func TestChatRouteWrongMethod(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"app.example.com"}}})
	ask := func(method, path, origin string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, h.srv.URL+path, nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, gateway.RouteAISDK, "POST, OPTIONS"},
		{http.MethodPut, gateway.RouteAGUI, "POST, OPTIONS"},
		{http.MethodPost, "/api/chat/c1/stream", "GET, HEAD, OPTIONS"},
	} {
		resp := ask(tc.method, tc.path, "https://app.example.com")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("%s %s: %s, Allow %q, CORS %q %q; want 405, %q, and the origin's CORS headers", tc.method, tc.path, resp.Status,
				resp.Header.Get("Allow"), resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Credentials"), tc.allow)
		}
	}
	// Another site's page is refused first, as on every route.
	if resp := ask(http.MethodGet, gateway.RouteAISDK, "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another site's GET %s: %s, want 403", gateway.RouteAISDK, resp.Status)
	}
}

// TestChatCancel: a front end's Stop route stops the chat's model turn, as
// /ws's cancel does: the open stream ends, and the next message's answer
// starts clean. Before it, a Stop closed the stream only: the turn ran on,
// and its rest came at the start of the next message's answer. A chat the
// browser does not have gets 204 too.
func TestChatCancel(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	for _, tc := range []struct {
		name, cancel string
		post         func(text string) *http.Response
	}{
		{"AI SDK", "/api/chat/chat-a/cancel", func(text string) *http.Response {
			return b.post(gateway.RouteAISDK, userMessage("chat-a", text), nil)
		}},
		{"AG-UI", "/ag-ui/th/cancel", func(text string) *http.Response {
			return b.post(gateway.RouteAGUI, map[string]any{"threadId": "th", "runId": text, "messages": []any{map[string]any{"id": text, "role": "user", "content": text}}}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := tc.post("gated flood") // streams, then waits for the gate
			r := bufio.NewReader(open.Body)
			if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
				t.Fatalf("the stream's first line: %q, %v", line, err)
			}
			stop := b.post(tc.cancel, "", nil)
			stop.Body.Close()
			if stop.StatusCode != http.StatusNoContent {
				t.Fatalf("the Stop: %s, want 204", stop.Status)
			}
			rest, _ := io.ReadAll(r) // the stream ends: the turn stopped
			open.Body.Close()
			if !strings.Contains(string(rest), `"finish"`) && !strings.Contains(string(rest), `"RUN_FINISHED"`) {
				t.Errorf("the stopped stream's end: %.300q", rest)
			}
			// AG-UI says the run was cancelled (RUN_FINISHED's outcome).
			if strings.Contains(string(rest), `"RUN_FINISHED"`) && !strings.Contains(string(rest), `"outcome":{"type":"cancelled"}`) {
				t.Errorf("the stopped run's end: %.300q, want its outcome cancelled", rest)
			}
			events, _ := sse(t, tc.post("hello"))
			var text strings.Builder
			for _, ev := range events {
				if d, ok := ev["delta"].(string); ok {
					text.WriteString(d)
				}
			}
			if got := text.String(); got != "echo: hello" {
				t.Errorf("the next message's answer: %.200q, want echo: hello alone", got)
			}
			for _, ev := range events {
				if outcome, ok := ev["outcome"].(map[string]any); ok && outcome["type"] != "success" {
					t.Errorf("the next message's run ended %v, want success", outcome)
				}
			}
		})
	}
	if resp := b.post("/api/chat/never/cancel", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("a Stop of a chat this browser does not have: %s, want 204", resp.Status)
	}
}
