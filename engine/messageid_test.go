package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// userMessages are the user messages of a session's journal, as
// "content#id".
func userMessages(t *testing.T, store engine.Store, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range checkJournal(t, store, id) {
		var f struct{ Message model.Message }
		if ev.Type == engine.EventMessage && json.Unmarshal(ev.Frame, &f) == nil && f.Message.Role == model.RoleUser {
			out = append(out, f.Message.Content+"#"+f.Message.ID)
		}
	}
	return out
}

// taken reads the page's frames until the message.taken for id.
func (r *reader) taken(id string) {
	r.t.Helper()
	r.until("message.taken "+id, func(ev engine.Event) bool {
		return ev.Type == engine.FrameMessageTaken && ev.Seq == 0 && string(ev.Frame) == fmt.Sprintf(`{"type":"message.taken","id":%q}`, id)
	})
}

// slowModel answers "done", and to "slow" once release is closed.
func slowModel(release <-chan struct{}) *fakeModel {
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Content == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return model.Response{}, ctx.Err()
			}
		}
		return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
	}}
}

// TestSendOnceTakesAMessageOnce: a page that sends a message again, not
// knowing whether it arrived (its connection dropped, the gateway
// restarted), gets it taken once: both copies are confirmed, one turn
// runs. The session remembers across a restart, a message waiting for
// the turn before it included.
func TestSendOnceTakesAMessageOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		release := make(chan struct{})
		m := slowModel(release)
		w := &testWorker{}
		ctx := context.Background()
		e1 := r.start(w, m)
		s1, err := e1.Open(ctx, engine.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p1 := attach(t, s1, 0)
		if err := p1.page.SendOnce(ctx, "m1", "hello"); err != nil {
			t.Fatal(err)
		}
		p1.taken("m1")
		p1.until("the reply to hello", finalIdle("done"))
		if err := p1.page.SendOnce(ctx, "m1", "hello"); err != nil {
			t.Fatal(err)
		}
		p1.taken("m1")

		// A message that waits for the turn before it: stored with its id.
		if err := p1.page.SendOnce(ctx, "m2", "slow"); err != nil {
			t.Fatal(err)
		}
		p1.taken("m2")
		if err := p1.page.SendOnce(ctx, "m3", "queued"); err != nil {
			t.Fatal(err)
		}
		p1.taken("m3")
		stop(t, e1) // the slow turn is cut

		close(release)
		s2 := r.loaded(w, m, s1.ID())
		p2 := attach(t, s2, 0)
		p2.until("the turn of the waiting message", idleAfter("queued"))
		for _, id := range []string{"m1", "m2", "m3"} {
			if err := p2.page.SendOnce(ctx, id, "again"); err != nil {
				t.Fatal(err)
			}
			p2.taken(id)
		}
		if err := p2.page.SendOnce(ctx, "m4", "new"); err != nil {
			t.Fatal(err)
		}
		p2.taken("m4")
		p2.until("the turn of new", idleAfter("new"))

		want := "hello#m1 slow#m2 queued#m3 new#m4"
		if got := strings.Join(userMessages(t, r.store, s1.ID()), " "); got != want {
			t.Errorf("user messages in the journal: %s; want %s", got, want)
		}
	})
}

// idleAfter is the session.idle after the user message content.
func idleAfter(content string) func(engine.Event) bool {
	seen := false
	return func(ev engine.Event) bool {
		if ev.Type == engine.EventMessage && strings.Contains(string(ev.Frame), `"role":"user","content":`+fmt.Sprintf("%q", content)) {
			seen = true
		}
		return seen && ev.Type == engine.EventSessionIdle
	}
}

// TestSendOnceRefusals: an id the gateway cannot keep is a bad request,
// and a page's message over the limit is refused whether or not it has
// an id; a Send without an id is never confirmed.
func TestSendOnceRefusals(t *testing.T) {
	h := setup(t, &testWorker{}, textModel(), engine.Options{MaxMessageBytes: 10})
	ctx := context.Background()
	for _, id := range []string{"", strings.Repeat("x", engine.MaxMessageIDBytes+1)} {
		if err := h.page.SendOnce(ctx, id, "hi"); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("SendOnce with an id of %d bytes: %v; want ErrBadRequest", len(id), err)
		}
	}
	if err := h.page.SendOnce(ctx, "m1", strings.Repeat("x", 11)); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Errorf("SendOnce over MaxMessageBytes: %v; want ErrLimitExceeded", err)
	}
	if err := h.page.Send(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	h.waitIdle()
	if err := h.page.SendOnce(ctx, strings.Repeat("y", engine.MaxMessageIDBytes), "named"); err != nil {
		t.Fatal(err)
	}
	h.waitType(engine.FrameMessageTaken)
	h.waitIdle()
	if n := h.count(engine.FrameMessageTaken, ""); n != 1 {
		t.Errorf("%d message.taken; want 1, for the message with an id only; seen %s", n, h.types())
	}
}

// TestACopyOfATakenMessageIsConfirmed: a page that sends again a message
// the session took, not knowing it did, gets it confirmed whatever would
// refuse a new message now: a copy over the length limit (the limit was
// lowered since, or the copy is another), or while messages wait for the
// turn and the copy would pass what they may hold. A refusal would tell
// the page the message was not taken.
func TestACopyOfATakenMessageIsConfirmed(t *testing.T) {
	release := make(chan struct{})
	m := slowModel(release)
	h := setup(t, &testWorker{}, m, engine.Options{MaxMessageBytes: 10})
	ctx := context.Background()
	if err := h.page.SendOnce(ctx, "m1", "slow"); err != nil {
		t.Fatal(err)
	}
	if err := h.page.SendOnce(ctx, "m2", "queued"); err != nil {
		t.Fatal(err)
	}
	h.waitType(engine.FrameMessageTaken)
	h.waitType(engine.FrameMessageTaken)
	for _, tc := range []struct{ id, content string }{
		{"m1", strings.Repeat("x", 11)}, // over the length limit
		{"m2", "a copy xx"},             // with "queued", past what may wait
	} {
		if err := h.page.SendOnce(ctx, tc.id, tc.content); err != nil {
			t.Errorf("a copy of the taken message %s (%q): %v, want it confirmed", tc.id, tc.content, err)
		}
	}
	h.waitType(engine.FrameMessageTaken)
	h.waitType(engine.FrameMessageTaken)
	if err := h.page.SendOnce(ctx, "m3", strings.Repeat("x", 11)); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Errorf("a new message over the limit: %v, want ErrLimitExceeded", err)
	}
	close(release)
	h.waitIdle() // after both turns: the queued message's follows the slow one's
	var users []string
	for _, f := range h.seen {
		var msg model.Message
		if f.Type == engine.EventMessage && json.Unmarshal(f.Message, &msg) == nil && msg.Role == model.RoleUser {
			users = append(users, msg.Content)
		}
	}
	if got := strings.Join(users, " "); got != "slow queued" {
		t.Errorf("the user messages: %s; want slow queued", got)
	}
}

// TestSendFromDecide: a worker's Decide that sends the session a message,
// with the context it got, is not held: the step that takes the message
// waits for Decide. Since Send waits for its step (it reports whether the
// message was taken), it would have waited for Decide itself.
func TestSendFromDecide(t *testing.T) {
	var s atomic.Pointer[engine.Session]
	var once atomic.Bool
	sent := make(chan error, 1)
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model"}}, nil
		}
		if mf, ok := req.Trigger.(engine.ModelFinished); ok && mf.Message.Content == "done" && once.CompareAndSwap(false, true) {
			sent <- s.Load().Send(ctx, "and one more thing")
		}
		return req.Proposed, nil
	}
	h := setup(t, w, textModel(), engine.Options{DecideTimeout: time.Hour})
	s.Store(h.s)
	h.send("hi")
	if err := recv(t, sent, "Send from Decide"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the message sent from Decide in the transcript", func() bool {
		return slices.ContainsFunc(h.transcript(), func(m model.Message) bool { return m.Content == "and one more thing" })
	})
}

// TestSendFromDecideIntoAFullInbox: a Decide that sends while the
// session's inbox is full is not held either: the message was posted, and
// the post waited for room the inbox made only once Decide returned.
func TestSendFromDecideIntoAFullInbox(t *testing.T) {
	var s atomic.Pointer[engine.Session]
	var once atomic.Bool
	deciding, release := make(chan struct{}), make(chan struct{})
	sent := make(chan error, 1)
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model"}}, nil
		}
		if _, ok := req.Trigger.(engine.ModelFinished); ok && once.CompareAndSwap(false, true) {
			close(deciding)
			<-release
			sent <- s.Load().Send(ctx, "and one more thing")
		}
		return req.Proposed, nil
	}
	h := setup(t, w, textModel(), engine.Options{DecideTimeout: time.Hour})
	s.Store(h.s)
	h.send("hi")
	recv(t, deciding, "the Decide of the reply")
	var others sync.WaitGroup
	for range 70 {
		others.Go(func() { _ = h.s.Send(context.Background(), "x") })
	}
	waitUntil(t, "the inbox full", func() bool { return h.s.Waiting() >= 64 })
	close(release)
	if err := recv(t, sent, "Send from Decide"); err != nil {
		t.Fatal(err)
	}
	others.Wait()
}
