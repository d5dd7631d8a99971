package gateway_test

import (
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// TestResumeSaysItsEpoch: session.opened names the session's run in
// memory, and a page resuming with the epoch of another run, past what
// the session held when this run began (a session new in this run held
// nothing), is refused as a page past the session's last event is; with
// this run's epoch, or none, it is taken. The check is the engine's
// (TestResumeOfACopyFromALostRun): this is the frame's road to it.
func TestResumeSaysItsEpoch(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	first, session := b.open(nil)
	first.say("hello")
	first.idleReply()
	_ = first.ws.Close(websocket.StatusNormalClosure, "")

	for _, tc := range []struct {
		name, epoch string
		taken       bool
	}{
		{"another run's copy", "not-this-run", false},
		{"no epoch", "", true},
	} {
		c := b.dial(nil)
		open := map[string]any{"type": "session.open", "session": session, "after": 1}
		if tc.epoch != "" {
			open["epoch"] = tc.epoch
		}
		c.send(open)
		f := c.until("the answer", func(f frame) bool { return f.Type == "session.opened" || f.Type == "error" })
		switch {
		case tc.taken && f.Type != "session.opened":
			t.Errorf("%s: %s, want session.opened", tc.name, f.raw)
		case !tc.taken && (f.Code != "bad_frame" || !strings.Contains(f.errorText(), "when it was loaded")):
			t.Errorf("%s: %s, want bad_frame saying the page's copy is of a run before", tc.name, f.raw)
		case tc.taken && f.Epoch == "":
			t.Errorf("%s: session.opened %s names no epoch", tc.name, f.raw)
		}
		if tc.taken {
			// This run's own epoch is taken too.
			again := b.dial(nil)
			again.send(map[string]any{"type": "session.open", "session": session, "after": 1, "epoch": f.Epoch})
			if g := again.until("the answer", func(f frame) bool { return f.Type == "session.opened" || f.Type == "error" }); g.Type != "session.opened" {
				t.Errorf("this run's epoch: %s, want session.opened", g.raw)
			}
			_ = again.ws.Close(websocket.StatusNormalClosure, "")
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
}
