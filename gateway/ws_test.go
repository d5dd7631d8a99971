package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/metrics"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// toolMessages returns the tool messages of a transcript, in order.
func toolMessages(tr []engine.Message) []engine.Message {
	var out []engine.Message
	for _, m := range tr {
		if m.Role == model.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

func TestClientToolRoundTrip(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, id := h.newBrowser(nil).open(pageTools)

	c.say("time")
	call := c.untilCall("call_time")
	started := c.count(func(f frame) bool { return f.Type == "tool.started" && f.ID == "call_time" && f.Attempt == 1 })
	if started != 1 {
		t.Errorf("tool.call arrived before its tool.started: %v", c.frames)
	}
	if call.Name != "get_local_time" || call.Attempt != 1 || call.Attempts != 1 {
		t.Errorf("tool.call = %s; want get_local_time, attempt 1 of 1", call)
	}
	var input engine.ToolInput
	if err := json.Unmarshal(call.Input, &input); err != nil || input.Status != engine.InputValid {
		t.Errorf("tool.call input = %s (%v); want status valid", call.Input, err)
	}
	if _, err := time.Parse(time.RFC3339, call.Deadline); err != nil {
		t.Errorf("tool.call deadline %q is not RFC 3339: %v", call.Deadline, err)
	}
	c.answer("call_time", call.Attempt, map[string]string{"time": "12:00", "timeZone": "UTC"})

	if got, want := c.idleReply(), `got: {"time":"12:00","timeZone":"UTC"}`; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	tr := h.transcript(id)
	roles := make([]string, len(tr))
	for i, m := range tr {
		roles[i] = m.Role
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Fatalf("transcript roles = %v, want %v", roles, want)
	}
	if m := tr[2]; m.ToolUseID != "call_time" || m.IsError || m.Content != `{"time":"12:00","timeZone":"UTC"}` {
		t.Errorf("tool message = %+v", m)
	}
	finished := c.count(func(f frame) bool { return f.Type == "tool.finished" && f.ID == "call_time" && f.OK })
	if finished != 1 {
		t.Errorf("saw %d ok tool.finished for call_time, want 1", finished)
	}
}

func TestParallelCallsSettleInCallOrder(t *testing.T) {
	tests := []struct {
		prompt string
		order  []string // the model's call order
	}{
		{"both", []string{"call_weather", "call_time"}},
		{"both reversed", []string{"call_time", "call_weather"}},
	}
	for _, tc := range tests {
		t.Run(tc.prompt, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			c, id := h.newBrowser(nil).open(pageTools)

			c.say(tc.prompt)
			var call frame
			workerSettled := false
			c.until("the client call and the worker call's settling", func(f frame) bool {
				switch {
				case f.Type == "tool.call" && f.ID == "call_time":
					call = f
				case f.Type == "tool.finished" && f.ID == "call_weather":
					workerSettled = true
				case f.Type == "tool.finished" && f.ID == "call_time":
					t.Fatalf("the client call settled before it was answered: %s", f)
				case f.Type == "message" && f.transcriptMessage().Role == model.RoleTool:
					t.Fatalf("a tool message joined the transcript while a sibling call was open: %s", f)
				}
				return call.ID != "" && workerSettled
			})
			// Answer the client call only now, after the worker call settled.
			c.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})

			results := map[string]string{"call_weather": "It's clear in Tokyo.", "call_time": `{"time":"12:00"}`}
			var want []string
			for _, id := range tc.order {
				want = append(want, results[id])
			}
			if got, want := c.idleReply(), "got: "+strings.Join(want, "; "); got != want {
				t.Errorf("reply = %q, want %q", got, want)
			}
			var gotOrder []string
			for _, m := range toolMessages(h.transcript(id)) {
				gotOrder = append(gotOrder, m.ToolUseID)
			}
			if !slices.Equal(gotOrder, tc.order) {
				t.Errorf("tool messages in the transcript: %v, want call order %v", gotOrder, tc.order)
			}
		})
	}
}

func TestReconnectRedeliversCall(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	first, id := b.open(pageTools)

	first.say("time")
	call1 := first.untilCall("call_time")
	last := slices.Max(append(first.seqs(), 0))
	// The connection drops mid-call, without a close handshake.
	if err := first.ws.CloseNow(); err != nil {
		t.Fatal(err)
	}

	second := b.dial(nil)
	second.send(map[string]any{"type": "session.open", "session": id, "after": last, "tools": pageTools})
	opened := second.untilType("session.opened")
	if opened.Session != id {
		t.Fatalf("session.opened = %s, want session %s", opened, id)
	}
	call2 := second.untilCall("call_time")
	if call2.Attempt != call1.Attempt || call2.Deadline != call1.Deadline {
		t.Errorf("redelivered %s; want the same attempt as %s", call2, call1)
	}
	second.answer("call_time", call2.Attempt, map[string]string{"time": "12:00"})
	if got, want := second.idleAfter(last), `got: {"time":"12:00"}`; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	// session.opened's seq is the last event the replay ends with.
	if replay := second.seqs(); len(replay) > 0 && opened.Seq < replay[0]-1 {
		t.Errorf("session.opened seq %d is before the replay %v", opened.Seq, replay)
	}

	for _, c := range []*wsClient{first, second} {
		if s := c.seqs(); !slices.IsSorted(s) {
			t.Errorf("seqs out of order on one connection: %v", s)
		}
	}
	checkSeqs(t, append(first.seqs(), second.seqs()...), h.session(id).LastSeq())

	settled := second.count(func(f frame) bool { return f.Type == "tool.finished" && f.ID == "call_time" })
	if settled != 1 {
		t.Errorf("tool.finished for call_time seen %d times, want 1", settled)
	}
	if n := len(toolMessages(h.transcript(id))); n != 1 {
		t.Errorf("transcript has %d tool messages, want 1", n)
	}
}

func TestLateAndDuplicateAnswers(t *testing.T) {
	// Each case drives one call to its outcome, then sends an answer that
	// must be refused with code and leave the outcome as it was.
	tests := []struct {
		name   string
		prompt string
		// settle brings the call to its outcome and returns the answer
		// that must then be refused.
		settle      func(t *testing.T, h *harness, c *wsClient) (id string, attempt int)
		code        string
		wantContent string // the tool message after the refused answer
	}{
		{
			name:   "late answer to a retried attempt, after the call settled",
			prompt: "flaky",
			settle: func(t *testing.T, h *harness, c *wsClient) (string, int) {
				c.until("tool.call attempt 1", func(f frame) bool { return f.Type == "tool.call" && f.Attempt == 1 })
				h.clock.Advance(5 * time.Second) // attempt 1 times out
				c.untilEach(map[string]func(frame) bool{
					"tool.cancel attempt 1": func(f frame) bool { return f.Type == "tool.cancel" && f.Attempt == 1 },
					"tool.retrying":         func(f frame) bool { return f.Type == "tool.retrying" },
				})
				h.clock.Advance(0) // no backoff: attempt 2 starts
				c.until("tool.call attempt 2", func(f frame) bool { return f.Type == "tool.call" && f.Attempt == 2 })
				// Attempt 1's answer arrives while attempt 2 runs.
				c.answer("call_flaky", 1, "first")
				if f := c.untilError(); f.Code != "stale_attempt" {
					t.Errorf("late answer while attempt 2 runs: %s, want code stale_attempt", f)
				}
				c.answer("call_flaky", 2, "second")
				c.idleReply()
				return "call_flaky", 1
			},
			code:        "stale_attempt",
			wantContent: "second",
		},
		{
			name:   "late answer to the final attempt, which timed out",
			prompt: "once",
			settle: func(t *testing.T, h *harness, c *wsClient) (string, int) {
				c.untilCall("call_once")
				h.clock.Advance(5 * time.Second)
				c.untilEach(map[string]func(frame) bool{
					"tool.cancel": func(f frame) bool { return f.Type == "tool.cancel" && f.ID == "call_once" },
					"the reply":   func(f frame) bool { return f.Type == "session.idle" && f.Seq > c.userSeq },
				})
				return "call_once", 1
			},
			code:        "stale_attempt",
			wantContent: "once timed out: 1 attempt of 5s, no answer from the browser.",
		},
		{
			name:   "duplicate answer",
			prompt: "time",
			settle: func(t *testing.T, h *harness, c *wsClient) (string, int) {
				call := c.untilCall("call_time")
				c.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
				c.idleReply()
				return "call_time", call.Attempt
			},
			code:        "settled",
			wantContent: `{"time":"12:00"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{fakeClock: true})
			c, sess := h.newBrowser(nil).open(pageTools)
			c.say(tc.prompt)
			callID, attempt := tc.settle(t, h, c)
			before := h.session(sess).LastSeq()

			c.answer(callID, attempt, "too late")
			if f := c.untilError(); f.Code != tc.code || !strings.Contains(f.errorText(), callID) {
				t.Errorf("refused answer got %s; want code %s naming %s", f, tc.code, callID)
			}
			// The session still works, and the answer changed nothing.
			if got := c.reply("still there?"); got != "echo: still there?" {
				t.Errorf("reply = %q", got)
			}
			tools := toolMessages(h.transcript(sess))
			if len(tools) != 1 || tools[0].Content != tc.wantContent {
				t.Errorf("tool messages = %+v; want one with %q", tools, tc.wantContent)
			}
			for _, f := range c.frames {
				if f.Seq > before && f.Type == "tool.finished" {
					t.Errorf("the refused answer settled the call again: %s", f)
				}
			}
		})
	}
}

func TestOriginPolicy(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"*.trusted.example"}}})
	b := h.newBrowser(nil)
	tests := []struct {
		name   string
		origin string
		ok     bool
	}{
		{"no Origin (not a browser)", "", true},
		{"same origin", h.srv.URL, true},
		{"allowed by a pattern", "https://app.trusted.example", true},
		{"another site", "https://evil.example", false},
		{"a lookalike host", "https://trusted.example.evil.example", false},
		{"opaque origin", "null", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			if tc.origin != "" {
				header.Set("Origin", tc.origin)
			}
			c, resp, err := b.dialErr(header)
			if !tc.ok {
				// Refused, where the page can read why: a close with 4003.
				if err != nil {
					t.Fatalf("dial: %v; want an upgrade closed with 4003", err)
				}
				_, rerr := c.read()
				if websocket.CloseStatus(rerr) != websocket.StatusCode(engine.CloseForbidden) || !strings.Contains(rerr.Error(), "--origins") {
					t.Fatalf("read %v, want close 4003 naming --origins", rerr)
				}
				if cookies := resp.Header.Values("Set-Cookie"); len(cookies) > 0 {
					t.Errorf("the refused upgrade set cookies %q", cookies)
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			c.send(map[string]any{"type": "session.open"})
			c.untilType("session.opened")
		})
	}
}

func TestReadLimit(t *testing.T) {
	const limit = 1024
	// message returns a message frame of exactly n bytes.
	message := func(n int) []byte {
		head, tail := `{"type":"message","content":"`, `"}`
		return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
	}
	tests := []struct {
		name string
		size int
		ok   bool
	}{
		{"at the limit", limit, true},
		{"one byte over", limit + 1, false},
		{"far over", 64 * limit, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			h := newHarness(t, harnessOptions{gateway: gateway.Options{ReadLimit: limit, Metrics: m}})
			c, _ := h.newBrowser(nil).open(pageTools)
			data := message(tc.size)
			if len(data) != tc.size {
				t.Fatalf("frame is %d bytes, want %d", len(data), tc.size)
			}
			c.sendRaw(websocket.MessageText, data)
			if tc.ok {
				if got := c.idleReply(); !strings.HasPrefix(got, "echo: aaa") {
					t.Errorf("reply = %q", got)
				}
				return
			}
			if code := c.untilClosed(); code != websocket.StatusMessageTooBig {
				t.Errorf("close status = %v, want %v", code, websocket.StatusMessageTooBig)
			}
			// Counted once the gateway's reader has seen it (after the
			// close the browser got).
			for deadline := time.Now().Add(hang); testutil.CollectAndCount(m.Registry(), "gateway_limits_hit_total") == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no limit hit counted for the frame over the read limit")
				}
			}
			want := `
# HELP gateway_limits_hit_total Requests refused at one of a browser's limits, by limit.
# TYPE gateway_limits_hit_total counter
gateway_limits_hit_total{limit="read_limit"} 1
`
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gateway_limits_hit_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCrossSessionRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	alice, bob := h.newBrowser(nil), h.newBrowser(nil)
	a, aliceSession := alice.open(pageTools)
	a.say("time")
	call := a.untilCall("call_time")

	b, _ := bob.open(pageTools)
	// Bob answers Alice's call: the id means nothing in his session.
	b.answer("call_time", call.Attempt, map[string]string{"time": "forged"})
	if f := b.untilError(); f.Code != "unknown_call" {
		t.Errorf("Bob's answer to Alice's call: %s, want code unknown_call", f)
	}
	// Bob tries to resume Alice's session, with his cookie and with none.
	intruders := map[string]*browser{"Bob's cookie": bob, "no cookie": {h: h, client: &http.Client{}}}
	for name, who := range intruders {
		c := who.dial(nil)
		c.send(map[string]any{"type": "session.open", "session": aliceSession, "tools": pageTools})
		if f := c.untilError(); f.Code != "unknown_session" {
			t.Errorf("%s resuming Alice's session: %s, want code unknown_session", name, f)
		}
	}
	if n := a.count(func(f frame) bool { return f.Type == "tool.leased" }); n != 0 {
		t.Error("Alice's call moved away from her page")
	}
	// Alice's call is unaffected: her answer counts, Bob's did not.
	a.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
	if got, want := a.idleReply(), `got: {"time":"12:00"}`; got != want {
		t.Errorf("Alice's reply = %q, want %q", got, want)
	}
	if n := a.count(func(f frame) bool { return f.Type == "error" }); n != 0 {
		t.Errorf("Alice saw %d error frames", n)
	}
}

func TestCookieIdentityOnUpgrade(t *testing.T) {
	// A browser that never loaded the page gets its cookie on the upgrade
	// response, and that cookie is what lets it resume.
	h := newHarness(t, harnessOptions{})
	b := &browser{h: h, client: &http.Client{Jar: mustJar(t)}}
	c := b.dial(nil)
	c.send(map[string]any{"type": "session.open", "tools": pageTools})
	id := c.untilType("session.opened").Session
	if got := c.reply("hello"); got != "echo: hello" {
		t.Fatalf("reply = %q", got)
	}
	if err := c.ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	again := b.dial(nil)
	again.send(map[string]any{"type": "session.open", "session": id})
	if f := again.untilType("session.opened"); f.Session != id {
		t.Fatalf("resume: %s", f)
	}
	if got := again.reply("again"); got != "echo: again" {
		t.Errorf("reply = %q", got)
	}
}

func TestMalformedFrames(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := h.newBrowser(nil).open(pageTools)
	c.say("time")
	call := c.untilCall("call_time")

	tests := []struct {
		name    string
		typ     websocket.MessageType
		data    string
		code    string
		mention string // the error message names the problem
	}{
		{"not JSON", websocket.MessageText, `{"type":`, "bad_frame", "JSON"},
		{"not an object", websocket.MessageText, `[1, 2]`, "bad_frame", "object"},
		{"no type", websocket.MessageText, `{"content": "hi"}`, "bad_frame", `"type"`},
		{"type is not a string", websocket.MessageText, `{"type": 7}`, "bad_frame", `"type"`},
		{"unknown type", websocket.MessageText, `{"type": "tool.call"}`, "unknown_frame", "tool.call"},
		{"message without content", websocket.MessageText, `{"type": "message"}`, "bad_frame", `"content"`},
		{"blank message", websocket.MessageText, `{"type": "message", "content": " \n"}`, "bad_frame", "empty"},
		{"content is not a string", websocket.MessageText, `{"type": "message", "content": 5}`, "bad_frame", `"content"`},
		{"message with an empty id", websocket.MessageText, `{"type": "message", "content": "hi", "id": ""}`, "bad_frame", `"id" is empty`},
		{"message with a long id", websocket.MessageText, `{"type": "message", "content": "hi", "id": "` + strings.Repeat("i", 129) + `"}`, "bad_frame", `"id" is 129 bytes, at most 128`},
		{"message id is not a string", websocket.MessageText, `{"type": "message", "content": "hi", "id": 7}`, "bad_frame", `"id"`},
		{"result without id", websocket.MessageText, `{"type": "tool.result", "attempt": 1, "result": {}}`, "bad_frame", `"id"`},
		{"result without result", websocket.MessageText, `{"type": "tool.result", "id": "call_time", "attempt": 1}`, "bad_frame", `"result"`},
		{"result without attempt", websocket.MessageText, `{"type": "tool.result", "id": "call_time", "result": {}}`, "bad_frame", `"attempt"`},
		{"attempt zero", websocket.MessageText, `{"type": "tool.result", "id": "call_time", "attempt": 0, "result": {}}`, "bad_frame", `"attempt"`},
		{"attempt is a string", websocket.MessageText, `{"type": "tool.result", "id": "call_time", "attempt": "1", "result": {}}`, "bad_frame", `"attempt"`},
		{"error without text", websocket.MessageText, `{"type": "tool.error", "id": "call_time", "attempt": 1}`, "bad_frame", `"error"`},
		{"error with a code of its own", websocket.MessageText, `{"type": "tool.error", "id": "call_time", "attempt": 1, "error": "no", "code": "user_said_no"}`, "bad_frame", `"code" "user_said_no" is not a tool error code`},
		{"error with a long code", websocket.MessageText, `{"type": "tool.error", "id": "call_time", "attempt": 1, "error": "no", "code": "` + strings.Repeat("x", 3000) + `"}`, "bad_frame", `"` + strings.Repeat("x", 64) + `"...`},
		{"attempt with a fraction", websocket.MessageText, `{"type": "tool.error", "id": "call_time", "attempt": 1.5, "error": "no"}`, "bad_frame", `"attempt" should be a whole number (digits only), not 1.5`},
		{"wrong attempt", websocket.MessageText, `{"type": "tool.result", "id": "call_time", "attempt": 2, "result": {}}`, "stale_attempt", "attempt 2"},
		{"unknown call", websocket.MessageText, `{"type": "tool.result", "id": "call_nope", "attempt": 1, "result": {}}`, "unknown_call", "call_nope"},
		{"binary frame", websocket.MessageBinary, `{"type": "cancel"}`, "bad_frame", "binary"},
		{"second session.open", websocket.MessageText, `{"type": "session.open"}`, "already_open", "already"},
		// Refused by the session, not the frame's decoding: named alike.
		{"approval of a call that asks none", websocket.MessageText, `{"type": "tool.approve", "id": "call_time", "digest": "d", "approved": true}`, "bad_frame", `"call_time" does not ask for approval`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(tc.typ, []byte(tc.data))
			f := c.untilError()
			if f.Code != tc.code || !strings.Contains(f.errorText(), tc.mention) {
				t.Errorf("%s: got %s; want code %s and a message naming %s", tc.data, f, tc.code, tc.mention)
			}
			badFrameSaysSo(t, f)
		})
	}
	// The call and the session survived all of it.
	c.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
	if got, want := c.idleReply(), `got: {"time":"12:00"}`; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("reply = %q", got)
	}
}

// TestHTMLComesAsItIs: a tool's result with HTML's <, > and & in it reaches
// the pages, the transcript and the reply as it was sent. They were written
// \u003c, \u003e and \u0026, as encoding/json does for HTML pages: a
// result of HTML came out up to six times its size.
func TestHTMLComesAsItIs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, id := h.newBrowser(nil).open(pageTools)
	c.say("time")
	call := c.untilCall("call_time")
	html := "<b>12 & 1</b>"
	// As a browser's JSON.stringify writes it (the test's json.Marshal would
	// escape it itself).
	c.sendRaw(websocket.MessageText, fmt.Appendf(nil, `{"type":"tool.result","id":"call_time","attempt":%d,"result":{"time":%q,"timeZone":"UTC"}}`, call.Attempt, html))
	finished := c.untilType("tool.finished")
	if !strings.Contains(string(finished.raw), html) {
		t.Errorf("tool.finished = %s; want the result's %s as it is", finished.raw, html)
	}
	if got := c.idleReply(); !strings.Contains(got, html) {
		t.Errorf("reply = %q; want it to quote %s", got, html)
	}
	for _, f := range c.frames {
		if strings.Contains(string(f.raw), `\u003c`) {
			t.Errorf("a %s frame escapes HTML: %s", f.Type, f.raw)
		}
	}
	if tr := h.transcript(id); !strings.Contains(tr[len(tr)-2].Content, html) {
		t.Errorf("the tool message in the transcript: %q", tr[len(tr)-2].Content)
	}
}

func TestOpenErrors(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	own, id := b.open(pageTools)
	if got := own.reply("hello"); got != "echo: hello" {
		t.Fatalf("reply = %q", got)
	}
	tests := []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"a message before session.open", map[string]any{"type": "message", "content": "hi"}, "not_open"},
		{"an answer before session.open", map[string]any{"type": "tool.result", "id": "call_time", "attempt": 1, "result": 1}, "not_open"},
		{"cancel before session.open", map[string]any{"type": "cancel"}, "not_open"},
		{"a ping before session.open", map[string]any{"type": "ping"}, "not_open"},
		{"a session that does not exist", map[string]any{"type": "session.open", "session": "nope"}, "unknown_session"},
		{"after beyond the last event", map[string]any{"type": "session.open", "session": id, "after": 1 << 40}, "bad_frame"},
		{"negative after", map[string]any{"type": "session.open", "session": id, "after": -1}, "bad_frame"},
		{"an empty tool name", map[string]any{"type": "session.open", "tools": []string{""}}, "bad_frame"},
		{"after without a session", map[string]any{"type": "session.open", "after": 3}, "bad_frame"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := b.dial(nil)
			c.send(tc.frame)
			f := c.untilError()
			if f.Code != tc.code {
				t.Errorf("got %s, want code %s", f, tc.code)
			}
			badFrameSaysSo(t, f)
			// The connection stays up: a good session.open still works.
			c.send(map[string]any{"type": "session.open", "session": id, "after": h.session(id).LastSeq()})
			if f := c.untilType("session.opened"); f.Session != id {
				t.Errorf("session.opened = %s", f)
			}
		})
	}
	// A refused session.open made no session: the browser's list holds
	// its one chat.
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	list, err := h.eng.List(ctx, h.session(id).Owner())
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Errorf("the browser's sessions after the refused opens: %+v, %v; want only %s", list, err, id)
	}
}

// TestOpenedComesFirst: a frame refused right after session.open, before
// the page has read anything, is answered after session.opened, as the
// protocol says a page's stream starts; a frame refused before the open
// is answered before it. The writer took the connection's replies before
// the page's frames, and the first error could come before the answer to
// the open. The race is a writer's: each round tries it again.
func TestOpenedComesFirst(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	for i := range 30 {
		c := b.dial(nil)
		c.send(map[string]any{"type": "cancel"})
		c.send(map[string]any{"type": "session.open", "tools": pageTools})
		c.send(map[string]any{"type": "tool.result", "id": "call_none", "attempt": 1, "result": 1})
		var got []string
		for len(got) < 3 {
			f, err := c.read()
			if err != nil {
				t.Fatal(err)
			}
			if f.Type == "session.opened" || f.Type == "error" {
				got = append(got, f.Type+" "+f.Code)
			}
		}
		if want := []string{"error not_open", "session.opened ", "error unknown_call"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: the page read %q, want %q", i+1, got, want)
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
}

// TestTwoTabsOfOneSession: the tab the user typed in runs the turn's client
// call and every tab sees which one does; when that tab closes, the call
// moves to the other, same attempt and deadline, and settles once.
func TestTwoTabsOfOneSession(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	older, id := b.open(pageTools)
	olderPage := older.frames[0].Page
	newer := b.dial(nil)
	newer.send(map[string]any{"type": "session.open", "session": id, "after": h.session(id).LastSeq(), "tools": pageTools})
	newerPage := newer.untilType("session.opened").Page
	if olderPage == "" || newerPage == "" || olderPage == newerPage {
		t.Fatalf("page ids %q and %q: want two distinct ids", olderPage, newerPage)
	}

	// The older tab asks, and runs the call, although the newer tab is the
	// most recent to attach.
	older.say("time")
	call := older.untilCall("call_time")
	for _, c := range []*wsClient{older, newer} {
		if f := c.seen("tool.started", func(f frame) bool { return f.Type == "tool.started" }); f.Page != olderPage {
			t.Errorf("tool.started names page %q, want the older tab's %q", f.Page, olderPage)
		}
	}
	// The older tab closes mid-call: the newer tab gets the same attempt.
	if err := older.ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	leased := newer.untilType("tool.leased")
	moved := newer.untilCall("call_time")
	if leased.Page != newerPage || moved.Attempt != call.Attempt || moved.Deadline != call.Deadline {
		t.Errorf("after the older tab closed: tool.leased %s, tool.call %s; want page %s and attempt %d, deadline %s", leased, moved, newerPage, call.Attempt, call.Deadline)
	}
	newer.answer("call_time", moved.Attempt, map[string]string{"time": "12:00"})
	if got, want := newer.idleAfter(leased.Seq), `got: {"time":"12:00"}`; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	if n := newer.count(func(f frame) bool { return f.Type == "tool.call" }); n != 1 {
		t.Errorf("the newer tab got %d tool.call frames, want 1", n)
	}
}

func TestCancelSettlesOpenCalls(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, id := h.newBrowser(nil).open(pageTools)
	c.say("time")
	call := c.untilCall("call_time")
	c.send(map[string]any{"type": "cancel"})
	c.untilEach(map[string]func(frame) bool{
		"tool.cancel":   func(f frame) bool { return f.Type == "tool.cancel" && f.ID == "call_time" },
		"tool.finished": func(f frame) bool { return f.Type == "tool.finished" && f.ID == "call_time" && !f.OK },
		"session.idle":  func(f frame) bool { return f.Type == "session.idle" && f.Seq > c.userSeq },
	})
	c.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
	if f := c.untilError(); f.Code != "stale_attempt" && f.Code != "settled" {
		t.Errorf("answer after cancel: %s, want it refused", f)
	}
	tools := toolMessages(h.transcript(id))
	if len(tools) != 1 || !tools[0].IsError {
		t.Errorf("tool messages = %+v; want one error", tools)
	}
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("reply = %q", got)
	}
}

// TestIdleSessionUnloadsAndComesBack: a session no page is connected to
// leaves memory after Unload; the page that comes back gets it again,
// loaded from the store, with nothing lost. One with a page stays.
func TestIdleSessionUnloadsAndComesBack(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{Unload: 50 * time.Millisecond}})
	b := h.newBrowser(nil)

	kept, keptID := b.open(nil)
	gone, goneID := b.open(nil)
	if got := gone.reply("remember me"); got != "echo: remember me" {
		t.Fatalf("reply %q", got)
	}
	sess := h.session(goneID)
	last := gone.seqs()[len(gone.seqs())-1]
	gone.ws.Close(websocket.StatusNormalClosure, "")

	select {
	case <-sess.Done():
	case <-time.After(hang):
		t.Fatal("the idle session did not unload")
	}
	if _, ok := h.eng.Session(goneID); ok {
		t.Fatal("the engine still holds the unloaded session")
	}
	again := b.dial(nil)
	again.send(map[string]any{"type": "session.open", "session": goneID, "after": 0})
	opened := again.untilType("session.opened")
	if opened.Session != goneID || opened.Seq != last {
		t.Errorf("session.opened %s, want session %s at seq %d", opened, goneID, last)
	}
	if got := again.reply("still there?"); got != "echo: still there?" {
		t.Errorf("reply after the load %q", got)
	}
	checkSeqs(t, again.seqs(), h.session(goneID).LastSeq())
	if _, ok := h.eng.Session(keptID); !ok {
		t.Error("the session with a page connected unloaded too")
	}
	kept.say("hello")
}

// TestOpenLongChatFromItsStart: a tab that opens a chat from its start, or
// from before the events the session keeps in memory, gets every event
// after it over /ws, in order, once: the older ones are read from the store.
func TestOpenLongChatFromItsStart(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{ReplayBytes: 1}})
	b := h.newBrowser(nil)
	first, id := b.open(pageTools)
	for i := range 6 {
		first.reply(fmt.Sprintf("hello %d", i))
	}
	last := h.session(id).LastSeq()
	for _, after := range []int64{0, last / 2} {
		tab := b.dial(nil)
		tab.send(map[string]any{"type": "session.open", "session": id, "after": after, "tools": pageTools})
		if opened := tab.untilType("session.opened"); opened.Seq != last {
			t.Fatalf("after %d: session.opened says seq %d, the session's last is %d", after, opened.Seq, last)
		}
		tab.until("the replay's last event", func(f frame) bool { return f.Seq == last })
		seqs := tab.seqs()
		for i, seq := range seqs {
			if seq != after+1+int64(i) || int64(len(seqs)) != last-after {
				t.Fatalf("after %d: replayed seqs %v, want %d..%d", after, seqs, after+1, last)
			}
		}
	}
}

// badFrameSaysSo: a bad_frame's message starts "bad frame: ", whether the
// frame's decoding or the session refused it, and does not name it twice
// or in the engine's words ("bad request").
func badFrameSaysSo(t *testing.T, f frame) {
	t.Helper()
	if f.Code != "bad_frame" {
		return
	}
	if text := f.errorText(); !strings.HasPrefix(text, "bad frame: ") || strings.Count(text, "bad frame") != 1 || strings.Contains(text, "bad request") {
		t.Errorf("a bad_frame's message: %q, want it to start \"bad frame: \" and say so once", text)
	}
}

// TestPingIsAnsweredWithPong: a page that has heard nothing for a while
// (it woke from a sleep) asks whether its socket still reaches the
// session: a ping gets a pong, on a session idle or busy, and the session
// sees nothing of it.
func TestPingIsAnsweredWithPong(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	c, id := b.open(pageTools)
	if got := c.reply("hello"); got != "echo: hello" {
		t.Fatalf("reply = %q", got)
	}
	last := h.session(id).LastSeq()
	for range 2 {
		c.send(map[string]any{"type": "ping"})
		if f := c.untilType("pong"); f.String() != `{"type":"pong"}` {
			t.Errorf("pong = %s", f)
		}
	}
	if n := h.session(id).LastSeq(); n != last {
		t.Errorf("the session's last event went from %d to %d with the pings, want none", last, n)
	}
	if got := c.reply("again"); got != "echo: again" {
		t.Fatalf("reply after the pings = %q", got)
	}
}
