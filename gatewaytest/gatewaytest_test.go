package gatewaytest_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/gatewaytest"
)

// hang bounds every wait; no test asserts how long anything took.
const hang = 20 * time.Second

// clockScript calls the demo page's get_local_time and says what came back.
var clockScript = scripted.Script{
	Rules: []scripted.Rule{{
		Match: "^what time is it$",
		Say:   "Let me look at your clock.",
		Tools: []scripted.ToolCall{{Name: "get_local_time"}},
	}},
	AfterTool: []scripted.AfterTool{{Tool: "get_local_time", OK: "Your clock says ${result}.", Error: "No clock: ${error}"}},
}

var noon = map[string]string{"time": "2030-01-02T12:00:00Z", "timeZone": "UTC"}

// open starts a gateway, opens a page that runs get_local_time and asks
// for the time; it returns the page and the call delivered to it.
func open(t *testing.T, ctx context.Context, o gatewaytest.Options) (*gatewaytest.Gateway, *gatewaytest.Page, gatewaytest.ToolCall) {
	t.Helper()
	g, p := openPage(t, ctx, o)
	if err := p.Send(ctx, "what time is it"); err != nil {
		t.Fatal(err)
	}
	call, err := p.ToolCall(ctx, "get_local_time")
	if err != nil {
		t.Fatal(err)
	}
	return g, p, call
}

// openPage starts a gateway (clockScript unless o has a script) and opens
// a page of a new browser that runs get_local_time.
func openPage(t *testing.T, ctx context.Context, o gatewaytest.Options) (*gatewaytest.Gateway, *gatewaytest.Page) {
	t.Helper()
	if o.Script == nil {
		o.Script = &clockScript
	}
	g := gatewaytest.Start(t, o)
	b, err := g.NewBrowser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Open(ctx, "get_local_time")
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

// finished is the call's tool.finished, decoded.
type finished struct {
	OK     bool
	Result string
	Error  string
	Code   string
}

func settle(t *testing.T, ctx context.Context, p *gatewaytest.Page, id string) finished {
	t.Helper()
	f, err := p.Finished(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out finished
	if err := f.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// recorded counts the session's tool.finished events of id in the
// gateway's record.
func recorded(t *testing.T, ctx context.Context, b *gatewaytest.Browser, session, id string) int {
	t.Helper()
	events, err := b.Record(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range events {
		if f.Type == "tool.finished" && f.ID == id {
			n++
		}
	}
	return n
}

func TestAnswerReachesTheModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, p, call := open(t, ctx, gatewaytest.Options{})
	if call.Attempt != 1 || call.Input.Status != "valid" || call.Deadline.IsZero() {
		t.Fatalf("call = %+v, want attempt 1 of valid input with a deadline", call)
	}
	if err := p.Answer(ctx, call, noon); err != nil {
		t.Fatal(err)
	}
	got := settle(t, ctx, p, call.ID)
	if !got.OK || !strings.Contains(got.Result, "2030-01-02T12:00:00Z") {
		t.Fatalf("tool.finished = %+v, want ok with the answer", got)
	}
	if _, err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if !hasAssistant(p, "Your clock says") {
		t.Fatalf("no assistant message saying the answer; frames:\n%v", p.Frames())
	}
}

func TestFailReachesTheModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, p, call := open(t, ctx, gatewaytest.Options{})
	if err := p.Fail(ctx, call, gatewaytest.Failure{Error: "The clock is broken.", Code: string(engine.CodeToolFailed)}); err != nil {
		t.Fatal(err)
	}
	got := settle(t, ctx, p, call.ID)
	if got.OK || got.Error != "The clock is broken." || got.Code != string(engine.CodeToolFailed) {
		t.Fatalf("tool.finished = %+v, want the page's error", got)
	}
	if _, err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if !hasAssistant(p, "No clock: The clock is broken.") {
		t.Fatalf("no assistant message with the error; frames:\n%v", p.Frames())
	}
}

// A second copy of the answer is refused (settled): the call settles once.
func TestDuplicateAnswerIsRefusedAndTheCallSettlesOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	g, p, call := open(t, ctx, gatewaytest.Options{})
	if err := p.Answer(ctx, call, noon, gatewaytest.Duplicate(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refusal(ctx, string(engine.WireSettled)); err != nil {
		t.Fatal(err)
	}
	if got := settle(t, ctx, p, call.ID); !got.OK {
		t.Fatalf("tool.finished = %+v, want ok", got)
	}
	if _, err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := g.NewBrowser(ctx) // another browser may not read the session
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(ctx, p.Session, 0); err == nil {
		t.Fatal("another browser resumed the session")
	}
	if n := recorded(t, ctx, p.Browser(), p.Session, call.ID); n != 1 {
		t.Fatalf("the gateway recorded %d tool.finished of %s, want 1", n, call.ID)
	}
}

// A message with an id that reaches the gateway twice is taken once, and
// each copy confirmed; the page's reconnect sending it again is confirmed
// without a second turn.
func TestMessageSentTwiceIsTakenOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, p := openPage(t, ctx, gatewaytest.Options{})
	if err := p.SendOnce(ctx, "m1", "hello", gatewaytest.Duplicate(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := p.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SendOnce(ctx, "m1", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Wait(ctx, func(f gatewaytest.Frame) bool { return f.Type == "message.taken" }); err != nil {
		t.Fatal(err)
	}
	seen := 0 // the first page's message.taken frames: one a copy
	if _, err := p.Wait(ctx, func(f gatewaytest.Frame) bool {
		if f.Type == "message.taken" {
			seen++
		}
		return seen == 2
	}); err != nil {
		t.Fatalf("each copy is confirmed: %v", err)
	}
	record, err := p.Browser().Record(ctx, p.Session)
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, f := range record {
		var m struct{ Message struct{ Role, ID string } }
		if f.Type == "message" && f.Decode(&m) == nil && m.Message.Role == "user" {
			users++
			if m.Message.ID != "m1" {
				t.Errorf("the user message's id is %q, want m1", m.Message.ID)
			}
		}
	}
	if users != 1 {
		t.Errorf("%d user messages recorded, want 1: three copies, one message", users)
	}
}

// A page that drops mid-call and resumes with `after` gets the same
// attempt delivered again; its answer settles the call once.
func TestDroppedPageGetsTheCallAgain(t *testing.T) {
	for _, store := range []gatewaytest.Store{gatewaytest.Memory, gatewaytest.JetStream} {
		t.Run(string(store), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			_, p, call := open(t, ctx, gatewaytest.Options{Store: store})
			p.Drop()
			again, err := p.Reconnect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if again.Session != p.Session || again.ID == p.ID {
				t.Fatalf("reconnected to session %s page %s, want session %s and a new page (was %s)", again.Session, again.ID, p.Session, p.ID)
			}
			redelivered, err := again.ToolCall(ctx, "get_local_time")
			if err != nil {
				t.Fatal(err)
			}
			if redelivered.ID != call.ID || redelivered.Attempt != call.Attempt {
				t.Fatalf("delivered %s attempt %d again, want %s attempt %d", redelivered.ID, redelivered.Attempt, call.ID, call.Attempt)
			}
			if err := again.Answer(ctx, redelivered, noon); err != nil {
				t.Fatal(err)
			}
			if got := settle(t, ctx, again, call.ID); !got.OK {
				t.Fatalf("tool.finished = %+v, want ok", got)
			}
			if _, err := again.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, f := range again.Frames() {
				if f.Type == "tool.finished" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("the reconnected page got %d tool.finished, want 1", n)
			}
		})
	}
}

// An answer that arrives after its attempt timed out is refused, and the
// call settles as the timeout said. The fake clock steps past the deadline.
func TestLateAnswerIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	fake := clock.NewFake(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))
	_, p, call := open(t, ctx, gatewaytest.Options{Clock: fake, ClientTimeout: time.Minute})
	fake.Advance(2 * time.Minute)
	got := settle(t, ctx, p, call.ID)
	if got.OK || got.Code != string(engine.CodeTimeout) {
		t.Fatalf("tool.finished = %+v, want a timeout", got)
	}
	if err := p.Answer(ctx, call, noon, gatewaytest.Delay(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refusal(ctx, string(engine.WireStaleAttempt)); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if _, err := gatewaytest.New(ctx, gatewaytest.Options{Store: "disk"}); err == nil || !strings.Contains(err.Error(), `store "disk"`) {
		t.Errorf("store disk: err = %v", err)
	}
	bad := scripted.Script{Rules: []scripted.Rule{{Match: "("}}}
	if _, err := gatewaytest.New(ctx, gatewaytest.Options{Script: &bad}); err == nil || !strings.Contains(err.Error(), "script") {
		t.Errorf("a bad script: err = %v", err)
	}
}

// TestListensWhereAsked: Addr picks the gateway's address, for a page that
// must know its URL before it starts; one already taken is an error.
func TestListensWhereAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	if _, err := gatewaytest.New(ctx, gatewaytest.Options{Addr: addr}); err == nil {
		t.Errorf("a gateway started on %s, which is taken", addr)
	}
	taken.Close()
	g, err := gatewaytest.New(ctx, gatewaytest.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if g.URL != "http://"+addr {
		t.Errorf("URL %s, want http://%s", g.URL, addr)
	}
}

func hasAssistant(p *gatewaytest.Page, text string) bool {
	for _, f := range p.Frames() {
		if f.Type != "message" {
			continue
		}
		var m struct {
			Message struct{ Role, Content string }
		}
		if json.Unmarshal(f.Raw, &m) == nil && m.Message.Role == "assistant" && strings.Contains(m.Message.Content, text) {
			return true
		}
	}
	return false
}

// Cancel is the Stop button: the open call settles cancelled, and no
// model turn follows; Close then ends the page as a closed tab does.
func TestCancelThenClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, p, call := open(t, ctx, gatewaytest.Options{})
	if err := p.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got := settle(t, ctx, p, call.ID); got.OK || got.Code != string(engine.CodeCancelled) {
		t.Fatalf("tool.finished = %+v, want cancelled", got)
	}
	if _, err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if hasAssistant(p, "Your clock says") || hasAssistant(p, "No clock") {
		t.Errorf("the model answered a stopped call; frames:\n%v", p.Frames())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := p.Answer(ctx, call, noon); err == nil {
		t.Error("an answer on a closed page was written")
	}
}
