package gateway_test

import (
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine/model"
)

// TestMessageSentAgainIsTakenOnce: a page that sends a message again with
// its id (it lost its connection before message.taken came) gets it taken
// once, and a message.taken for each copy; the message events carry the
// id; a refused message's error names its id, so the page stops sending it.
func TestMessageSentAgainIsTakenOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	early := b.dial(nil)
	early.send(map[string]any{"type": "message", "content": "hello", "id": "m-early"})
	if f := early.untilError(); f.Code != "not_open" || f.ID != "m-early" {
		t.Errorf("a message before session.open: %s; want not_open naming m-early", f)
	}
	c, session := b.open(pageTools)
	taken := func(c *wsClient, id string) {
		t.Helper()
		f := c.until("message.taken "+id, func(f frame) bool { return f.Type == "message.taken" })
		if f.ID != id || f.Seq != 0 || f.String() != `{"type":"message.taken","id":"`+id+`"}` {
			t.Fatalf("got %s; want message.taken for %s, without seq", f, id)
		}
	}
	c.send(map[string]any{"type": "message", "content": "hello", "id": "m-1"})
	taken(c, "m-1")
	user := c.until("the user's message", func(f frame) bool {
		return f.Type == "message" && f.transcriptMessage().Role == model.RoleUser
	})
	if m := user.transcriptMessage(); m.Content != "hello" || m.ID != "m-1" {
		t.Errorf("message event %s; want hello with id m-1", user)
	}
	if got := c.idleReply(); got != "echo: hello" {
		t.Errorf("reply = %q", got)
	}

	// The page reloads and sends it again, not knowing it arrived.
	c2 := b.dial(nil)
	c2.send(map[string]any{"type": "session.open", "session": session, "after": 0, "tools": pageTools})
	c2.untilType("session.opened")
	c2.send(map[string]any{"type": "message", "content": "hello", "id": "m-1"})
	taken(c2, "m-1")
	// A copy's content is not read, be it empty.
	c2.send(map[string]any{"type": "message", "content": " ", "id": "m-1"})
	taken(c2, "m-1")
	if got := c2.reply("next"); got != "echo: next" {
		t.Errorf("reply = %q", got)
	}
	var users []string
	for _, m := range h.transcript(session) {
		if m.Role == model.RoleUser {
			users = append(users, m.Content)
		}
	}
	if got := strings.Join(users, ", "); got != "hello, next" {
		t.Errorf("user messages: %s; want hello, next: the copy is not taken again", got)
	}

	// Refused: the error carries the id.
	c2.send(map[string]any{"type": "message", "content": strings.Repeat("x", 300<<10), "id": "m-big"})
	if f := c2.untilError(); f.Code != "limit_exceeded" || f.ID != "m-big" {
		t.Errorf("got %s; want limit_exceeded for m-big", f)
	}
	c2.send(map[string]any{"type": "message", "content": " ", "id": "m-blank"})
	if f := c2.untilError(); f.Code != "bad_frame" || f.ID != "m-blank" {
		t.Errorf("got %s; want bad_frame for m-blank", f)
	}
	long := strings.Repeat("i", 129)
	c2.send(map[string]any{"type": "message", "content": "hi", "id": long})
	if f := c2.untilError(); f.Code != "bad_frame" || f.ID != long {
		t.Errorf("got %s; want bad_frame naming the long id", f)
	}
	if n := c2.count(func(f frame) bool { return f.Type == "message.taken" }); n != 2 {
		t.Errorf("%d message.taken on the second page; want 2", n)
	}
	if n := c2.count(func(f frame) bool { return f.Type == "error" && f.ID == "m-1" }); n != 0 {
		t.Errorf("%d copies of m-1 refused; want none", n)
	}
}
