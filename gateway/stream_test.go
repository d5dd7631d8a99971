package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// TestReconnectAndAnswerRace: the socket drops mid-call, then the page
// sends session.open with after and its tool.result back to back. The call
// settles once, and the page never receives the call's tool.call after its
// tool.finished (a client other than our SDK would run the tool again).
func TestReconnectAndAnswerRace(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	// One browser opens a session a round, far past a person's rate.
	h := newHarness(t, harnessOptions{gateway: gateway.Options{NewSessionsPerMinute: -1}})
	b := h.newBrowser(nil)
	for round := range rounds {
		c, id := b.open(pageTools)
		c.say("time")
		call := c.untilCall("call_time")
		last := c.seqs()[len(c.seqs())-1]
		_ = c.ws.CloseNow() // the network drops: no close handshake

		again := b.dial(nil)
		again.send(map[string]any{"type": "session.open", "session": id, "after": last, "tools": pageTools})
		again.answer("call_time", call.Attempt, map[string]string{"time": "12:00"})
		if got, want := again.idleAfter(last), `got: {"time":"12:00"}`; got != want {
			t.Fatalf("round %d: reply %q, want %q; frames %v", round, got, want, again.frames)
		}
		finished := false
		for _, f := range again.frames {
			switch {
			case f.Type == "tool.finished" && f.ID == "call_time":
				if finished {
					t.Fatalf("round %d: tool.finished twice: %v", round, again.frames)
				}
				finished = true
			case f.Type == "tool.call" && finished:
				t.Fatalf("round %d: tool.call after the call's tool.finished: %v", round, again.frames)
			case f.Type == "error":
				t.Fatalf("round %d: the answer was refused: %s", round, f)
			}
		}
		if !finished {
			t.Fatalf("round %d: no tool.finished: %v", round, again.frames)
		}
		_ = again.ws.Close(websocket.StatusNormalClosure, "")
		h.session(id).End(t.Context(), "round over")
	}
}

// TestRefusedFramesKeepTheConnection: every refused frame gets its error
// reply, a flood of them included, during a fast streamed reply too; the
// connection and the session stay up.
func TestRefusedFramesKeepTheConnection(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := h.newBrowser(nil).open(pageTools)
	c.say("flood") // the session streams while the bad frames go in
	const bad = 100
	for i := range bad {
		c.send(map[string]any{"type": "tool.result", "id": fmt.Sprintf("nope_%d", i), "attempt": 1, "result": "x"})
	}
	for i := range bad {
		f := c.untilError()
		if f.Code != string(engine.WireUnknownCall) || !strings.Contains(f.errorText(), fmt.Sprintf(`"nope_%d"`, i)) {
			t.Fatalf("reply %d: %s, want unknown_call for nope_%d", i, f, i)
		}
	}
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("after the flood, reply %q", got)
	}
}

// TestRefusedFramesAreRateLimited: past the burst, the page is told once
// that it is being slowed down, and still gets a reply to every frame.
func TestRefusedFramesAreRateLimited(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{RefusedBurst: 20, RefusedRate: 50}})
	c, _ := h.newBrowser(nil).open(pageTools)
	const bad = 60
	for range bad {
		c.sendRaw(websocket.MessageText, []byte(`{"type":"nonsense"}`))
	}
	unknown, limited := 0, 0
	for unknown < bad {
		f := c.untilError()
		switch f.Code {
		case string(engine.WireUnknownFrame):
			unknown++
		case string(engine.WireRateLimited):
			limited++
			if !strings.Contains(f.errorText(), "50 a second") {
				t.Errorf("rate_limited says %q", f.errorText())
			}
		default:
			t.Fatalf("unexpected error frame %s", f)
		}
	}
	// Once per episode: the flood is one, however its frames are paced,
	// until the whole burst (0.4 s here) comes back.
	if limited != 1 {
		t.Errorf("%d rate_limited frames for %d refused, want one for the episode", limited, unknown)
	}
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("after the flood, reply %q", got)
	}
	h.logs.wait(t, "too many refused frames")
}

// TestRefusedFramesEpisodeOutlastsAPause: a page that pauses its flood for
// less than the burst takes to come back is in the same episode: it is not
// told again that it is slowed (it was, at every token the pause gave
// back). One that stops for the whole burst's time starts another.
func TestRefusedFramesEpisodeOutlastsAPause(t *testing.T) {
	// A token every 100 ms, the burst of 5 back after 500 ms, on a clock
	// the test moves: only the throttle's waits are its timers.
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, harnessOptions{gateway: gateway.Options{RefusedBurst: 5, RefusedRate: 10, Clock: clk}})
	c, _ := h.newBrowser(nil).open(pageTools)
	flood := func() (limited int) {
		t.Helper()
		for range 8 {
			c.sendRaw(websocket.MessageText, []byte(`{"type":"nonsense"}`))
		}
		// The reader waits a token each frame past the burst: give it one
		// whenever it waits, until every frame is answered.
		ctx, stop := context.WithCancel(context.Background())
		advanced := make(chan struct{})
		go func() {
			defer close(advanced)
			for clk.WaitPending(ctx, 1) == nil {
				clk.Advance(100 * time.Millisecond)
			}
		}()
		defer func() { stop(); <-advanced }()
		for unknown := 0; unknown < 8; {
			switch f := c.untilError(); f.Code {
			case string(engine.WireUnknownFrame):
				unknown++
			case string(engine.WireRateLimited):
				limited++
			default:
				t.Fatalf("unexpected error frame %s", f)
			}
		}
		return limited
	}
	if n := flood(); n != 1 {
		t.Fatalf("the first flood: %d rate_limited, want 1", n)
	}
	clk.Advance(200 * time.Millisecond) // two tokens back, not five
	if n := flood(); n != 0 {
		t.Errorf("a flood after a short pause: %d rate_limited, want 0 (the same episode)", n)
	}
	clk.Advance(time.Second) // the whole burst back
	if n := flood(); n != 1 {
		t.Errorf("a flood after the burst came back: %d rate_limited, want 1 (another episode)", n)
	}
}

// TestDeclaredToolsLimits: a page may declare at most MaxPageTools names of
// at most MaxToolNameBytes; past either, session.open is refused with
// limit_exceeded and the connection stays up.
func TestDeclaredToolsLimits(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{MaxPageTools: 3}})
	b := h.newBrowser(nil)
	c := b.dial(nil)
	for _, tools := range [][]string{{"a", "b", "c", "d"}, {strings.Repeat("n", engine.MaxToolNameBytes+1)}} {
		c.send(map[string]any{"type": "session.open", "tools": tools})
		if f := c.untilError(); f.Code != string(engine.WireLimitExceeded) {
			t.Errorf("session.open with %d tools: %s, want limit_exceeded", len(tools), f)
		}
	}
	if h.eng.Loaded() != 0 {
		t.Errorf("%d sessions left open by refused opens", h.eng.Loaded())
	}
	c.send(map[string]any{"type": "session.open", "tools": []string{"a", "b", "c"}})
	c.untilType("session.opened")
}

// TestMessageLimit: session.opened tells the page its limits; a message
// over MaxMessageBytes is refused with limit_exceeded, naming the figures,
// and the session takes the next one.
func TestMessageLimit(t *testing.T) {
	h := newHarness(t, harnessOptions{engine: engine.Options{MaxMessageBytes: 100}, gateway: gateway.Options{ReadLimit: 4096}})
	b := h.newBrowser(nil)
	c := b.dial(nil)
	c.send(map[string]any{"type": "session.open"})
	var opened struct{ Limits engine.PageLimits }
	if err := json.Unmarshal(c.untilType("session.opened").raw, &opened); err != nil {
		t.Fatal(err)
	}
	if want := (engine.PageLimits{FrameBytes: 4096, MessageBytes: 100}); opened.Limits != want {
		t.Errorf("session.opened limits %+v, want %+v", opened.Limits, want)
	}
	c.send(map[string]any{"type": "message", "content": strings.Repeat("é", 51)})
	f := c.untilError()
	if f.Code != string(engine.WireLimitExceeded) || !strings.Contains(f.errorText(), "102 bytes, at most 100") {
		t.Errorf("a 102-byte message: %s, want limit_exceeded naming 102 and 100", f.raw)
	}
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("after the refused message, reply %q", got)
	}
}

// TestHungTabLosesTheLease: the tab that runs a call stops answering pings;
// it is closed (4000) and the call moves to the other tab, same attempt and
// deadline.
func TestHungTabLosesTheLease(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{PingInterval: 500 * time.Millisecond}})
	b := h.newBrowser(nil)
	hung, id := b.open(pageTools)
	live := b.dial(nil)
	live.send(map[string]any{"type": "session.open", "session": id, "after": h.session(id).LastSeq(), "tools": pageTools})
	livePage := live.untilType("session.opened").Page

	hung.say("time")
	call := hung.untilCall("call_time")
	// hung reads nothing more, so it answers no ping; live keeps reading.
	leased := live.untilType("tool.leased")
	moved := live.untilCall("call_time")
	if leased.Page != livePage || moved.Attempt != call.Attempt || moved.Deadline != call.Deadline {
		t.Errorf("tool.leased %s, tool.call %s; want page %s, attempt %d, deadline %s", leased, moved, livePage, call.Attempt, call.Deadline)
	}
	live.answer("call_time", moved.Attempt, map[string]string{"time": "12:00"})
	if got, want := live.idleAfter(leased.Seq), `got: {"time":"12:00"}`; got != want {
		t.Errorf("reply %q, want %q", got, want)
	}
	if code := hung.untilClosed(); code != websocket.StatusCode(engine.CloseUnresponsive) {
		t.Errorf("the hung tab was closed with %v, want %v", code, engine.CloseUnresponsive)
	}
}

// getJSON GETs path with the browser's cookies and decodes the answer.
func (b *browser) getJSON(path string, v any) int {
	b.h.t.Helper()
	resp, err := b.client.Get(b.h.srv.URL + path)
	if err != nil {
		b.h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		b.h.t.Fatalf("GET %s: %s: %v", path, resp.Status, err)
	}
	return resp.StatusCode
}

// TestSessionsList: GET /sessions lists this browser's chats, newest first,
// titled by their first user message; another browser's are not there.
func TestSessionsList(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	alice, bob := h.newBrowser(nil), h.newBrowser(nil)
	first, firstID := alice.open(nil)
	first.reply("hello   there\nfriend")
	time.Sleep(10 * time.Millisecond) // the list is ordered by the last message's time
	second, secondID := alice.open(nil)
	second.reply("the second chat")
	bob.open(nil)

	var list struct {
		Sessions []struct {
			ID, Title string
			Created   time.Time
		}
	}
	if code := alice.getJSON("/sessions", &list); code != http.StatusOK {
		t.Fatalf("GET /sessions: %d", code)
	}
	if len(list.Sessions) != 2 || list.Sessions[0].ID != secondID || list.Sessions[1].ID != firstID ||
		list.Sessions[0].Title != "the second chat" || list.Sessions[1].Title != "hello there friend" {
		t.Errorf("alice's sessions: %+v", list.Sessions)
	}
	var empty struct{ Sessions []any }
	stranger := &browser{h: h, client: &http.Client{}}
	if code := stranger.getJSON("/sessions", &empty); code != http.StatusOK || len(empty.Sessions) != 0 {
		t.Errorf("a browser with no chats: %d %+v", code, empty)
	}
}

// TestHealthWhenTheStoreFails: while the store refuses events, /readyz
// says 503 with the cause (/healthz stays 200, saying degraded), and a new
// message is refused with store_unavailable; once it recovers, the session
// carries on with nothing lost.
func TestHealthWhenTheStoreFails(t *testing.T) {
	store := engine.NewMemoryStore()
	var mu sync.Mutex
	full := false
	store.Fail = func(string, engine.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		if full {
			return errors.New("no space left on device")
		}
		return nil
	}
	h := newHarness(t, harnessOptions{engine: engine.Options{Store: store}})
	b := h.newBrowser(nil)
	c, _ := b.open(nil)
	mu.Lock()
	full = true
	mu.Unlock()
	c.say("one")
	var ready struct{ Status, Why string }
	deadline := time.Now().Add(hang)
	for b.getJSON("/readyz", &ready) != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %+v while the store fails", ready)
		}
		time.Sleep(time.Millisecond)
	}
	if ready.Status != "not ready" || !strings.Contains(ready.Why, "no space left on device") {
		t.Errorf("/readyz = %+v", ready)
	}
	var health struct{ Status, Store string }
	if code := b.getJSON("/healthz", &health); code != http.StatusOK || health.Status != "degraded" || !strings.Contains(health.Store, "no space left on device") {
		t.Errorf("/healthz while the store fails: %d %+v, want 200, degraded and the cause", code, health)
	}
	c.say("two")
	if f := c.untilError(); f.Code != string(engine.WireStoreFailed) || !strings.Contains(f.errorText(), "no space left on device") {
		t.Errorf("a message while the store fails: %s", f)
	}
	mu.Lock()
	full = false
	mu.Unlock()
	if got := c.idleAfter(0); got != "echo: one" {
		t.Errorf("once the store recovered, the reply %q", got)
	}
	if code := b.getJSON("/healthz", &health); code != http.StatusOK || health.Status != "ok" {
		t.Errorf("/healthz after the recovery: %d %+v", code, health)
	}
	if code := b.getJSON("/readyz", &ready); code != http.StatusOK || ready.Status != "ready" {
		t.Errorf("/readyz after the recovery: %d %+v", code, ready)
	}
}

// TestHealthNamesTheStoresOwnError: while the store says it is down,
// /healthz names that, the cause, before what an append met because of it
// (a lease it could not renew, a timeout).
func TestHealthNamesTheStoresOwnError(t *testing.T) {
	store := &downStore{MemoryStore: engine.NewMemoryStore()}
	var failing atomic.Bool
	store.Fail = func(string, engine.Batch) error {
		if failing.Load() {
			return errors.New("this node's lease on the session expired unrenewed")
		}
		return nil
	}
	h := newHarness(t, harnessOptions{engine: engine.Options{Store: store}})
	b := h.newBrowser(nil)
	c, _ := b.open(nil)
	failing.Store(true)
	c.say("one")
	var health struct{ Status, Store string }
	deadline := time.Now().Add(hang)
	for b.getJSON("/healthz", &health); health.Status != "degraded"; b.getJSON("/healthz", &health) {
		if time.Now().After(deadline) {
			t.Fatalf("/healthz stayed %+v while appends fail", health)
		}
		time.Sleep(time.Millisecond)
	}
	store.down.Store(true)
	if b.getJSON("/healthz", &health); !strings.Contains(health.Store, "RECONNECTING") {
		t.Errorf("/healthz while the store is down: %+v, want the store's own error", health)
	}
	store.down.Store(false)
	failing.Store(false)
}

// downStore is a memory store that says it is down while down is set, as
// the JetStream store does while NATS is away.
type downStore struct {
	*engine.MemoryStore
	down atomic.Bool
}

func (d *downStore) Healthy() error {
	if d.down.Load() {
		return errors.New("the connection to NATS is RECONNECTING")
	}
	return nil
}

// TestOpenWhileTheStoreIsDown: while the store says it is down, a page
// asking for a new session, or for a replay from before the events a
// session in memory keeps, is refused at once with store_unavailable,
// naming the cause, and its socket carries on (its reader was held until
// the store's timeouts, the pings unanswered, and the socket closed with
// 4000): a session in memory opens on it as usual from its kept events,
// and once the store is back a new one opens again.
func TestOpenWhileTheStoreIsDown(t *testing.T) {
	store := &downStore{MemoryStore: engine.NewMemoryStore()}
	h := newHarness(t, harnessOptions{engine: engine.Options{Store: store, ReplayBytes: 1}})
	b := h.newBrowser(nil)
	first, id := b.open(nil)
	first.say("one")
	first.idleAfter(0)
	last := h.session(id).LastSeq()
	store.down.Store(true)

	c := b.dial(nil)
	for _, open := range []map[string]any{{"type": "session.open"}, {"type": "session.open", "session": id}} {
		c.send(open)
		if f := c.untilError(); f.Code != string(engine.WireStoreFailed) || !strings.Contains(f.errorText(), "RECONNECTING") {
			t.Errorf("%v while the store is down: %s, want store_unavailable naming the cause", open, f)
		}
	}
	// The same socket goes on: its reader was not held.
	c.send(map[string]any{"type": "session.open", "session": id, "after": last})
	if f := c.untilType("session.opened"); f.Session != id {
		t.Errorf("the session in memory opened %s, want %s", f.Session, id)
	}

	store.down.Store(false)
	if _, again := b.open(nil); again == "" || again == id {
		t.Errorf("a new session once the store is back: %q", again)
	}
}

// damagedStore reads one session's journal back damaged, as a disk that
// lost bytes would.
type damagedStore struct {
	*engine.MemoryStore
	damaged atomic.Value // string: the session
}

func (d *damagedStore) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	batches, err := d.MemoryStore.Load(ctx, session)
	if err != nil || d.damaged.Load() != session {
		return batches, err
	}
	batches = slices.Clone(batches)
	batches[len(batches)-1].State = json.RawMessage(`{"v":`)
	return batches, nil
}

// TestUnreadableSession: a session whose journal cannot be read back is
// refused with session_unreadable, naming it, and the connection stays
// for a new session (what the SDK opens then); the operator's log says
// it at ERROR once an hour, not at every try; another browser asking for
// it hears unknown_session, as for any id not its own.
func TestUnreadableSession(t *testing.T) {
	store := &damagedStore{MemoryStore: engine.NewMemoryStore()}
	gatewayClock := clock.NewFake(time.Now()) // the cookie jar's time: the identity's cookie must not have expired
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{Store: store, Unload: 20 * time.Millisecond},
		gateway: gateway.Options{Clock: gatewayClock},
	})
	b := h.newBrowser(nil)
	c, id := b.open(nil)
	if got := c.reply("remember me"); got != "echo: remember me" {
		t.Fatalf("reply %q", got)
	}
	sess := h.session(id)
	c.ws.Close(websocket.StatusNormalClosure, "")
	select {
	case <-sess.Done():
	case <-time.After(hang):
		t.Fatal("the idle session did not unload")
	}
	store.damaged.Store(id)

	errorLines := func() int {
		return strings.Count(h.logs.String(), "ERROR a session's journal cannot be read")
	}
	tryOpen := func(b *browser) frame {
		t.Helper()
		again := b.dial(nil)
		again.send(map[string]any{"type": "session.open", "session": id, "after": 2})
		f := again.untilError()
		again.send(map[string]any{"type": "session.open"})
		if opened := again.untilType("session.opened"); opened.Session == "" || opened.Session == id {
			t.Errorf("a new session on the same connection: %s", opened.raw)
		}
		return f
	}
	for try := 1; try <= 2; try++ {
		f := tryOpen(b)
		if f.Code != string(engine.WireUnreadable) || !strings.Contains(f.errorText(), id) || !strings.Contains(f.errorText(), "cannot be opened") {
			t.Errorf("try %d: %s; want session_unreadable naming the session", try, f.raw)
		}
	}
	if n := errorLines(); n != 1 {
		t.Errorf("%d ERROR lines after two tries, want 1", n)
	}
	gatewayClock.Advance(time.Hour)
	tryOpen(b)
	if n := errorLines(); n != 2 {
		t.Errorf("%d ERROR lines an hour later, want 2", n)
	}

	stranger := h.newBrowser(nil)
	if f := tryOpen(stranger); f.Code != string(engine.WireUnknownSession) {
		t.Errorf("another browser: %s; want unknown_session", f.raw)
	}
}

// TestAFloodedPageIsClosedByItsPing: a page that sent far more refused
// frames than the gateway reads a second waits behind them, and so does
// its pong: it is closed as a page that does not answer pings (4000), and
// its SDK reconnects, where it waited for hours (an outside audit: 324,548
// refused frames, then a message not taken 90 s later, and no close).
func TestAFloodedPageIsClosedByItsPing(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{RefusedBurst: 10, RefusedRate: 5, PingInterval: 100 * time.Millisecond}})
	c, _ := h.newBrowser(nil).open(pageTools)
	for range 500 { // 100 s of reading at 5 a second
		c.sendRaw(websocket.MessageText, []byte(`{"type":"nonsense"}`))
	}
	if code := c.untilClosed(); code != websocket.StatusCode(engine.CloseUnresponsive) {
		t.Errorf("close status %v, want %v", code, engine.CloseUnresponsive)
	}
	h.logs.wait(t, "pong waits behind the refused frames")
}
