package gateway_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/metrics"
	"github.com/coder/websocket"
)

// TestFramesAsTheSessionEndsAreAnswered: a frame a page sends while its
// session ends, which the session had not taken yet, gets its own reply
// (session_closed) before the page's close (1000), as every refused frame
// does; the close came first, and the reply was lost.
func TestFramesAsTheSessionEndsAreAnswered(t *testing.T) {
	m := metrics.New()
	entered, release := make(chan struct{}), make(chan struct{})
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{Metrics: m},
		gateway: gateway.Options{Metrics: m},
		worker: func(w engine.Worker) engine.Worker {
			return engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				if u, ok := req.Trigger.(engine.UserMessage); ok && u.Message.Content == "end slowly" {
					close(entered)
					<-release
					return engine.Decision{Actions: []engine.Action{engine.EndSession{Reason: "done"}}}, nil
				}
				return w.Decide(ctx, req)
			})
		},
	})
	b := h.newBrowser(nil)
	a, id := b.open(nil)
	other := b.dial(nil)
	other.send(map[string]any{"type": "session.open", "session": id})
	other.untilType("session.opened")
	a.send(map[string]any{"type": "message", "content": "end slowly"})
	<-entered // the session decides; an answer now waits for it
	other.send(map[string]any{"type": "tool.result", "id": "call_gone", "attempt": 1, "result": "late"})
	waitFor(t, "the answer read", func() bool { return framesIn(t, m, "tool.result") == 1 })
	// Read is not handed over: under load the decision could end the
	// session first, and the socket close with no reply to wait for.
	waitFor(t, "the answer in the session's inbox", answerWaiting)
	close(release)
	refused := other.until("the reply to the answer", func(f frame) bool { return f.Type == "error" })
	if refused.Code != string(engine.WireSessionClosed) {
		t.Errorf("the answer's reply: %s, want session_closed", refused.raw)
	}
	if code := other.untilClosed(); code != websocket.StatusNormalClosure {
		t.Errorf("the page closed with %v, want 1000", code)
	}
}

// answerWaiting reports whether a connection waits in Page.Answer for the
// session's reply, past its post: the answer is in the session's inbox.
func answerWaiting() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "engine.(*Page).Answer(") && !strings.Contains(g, "postHere(") {
			return true
		}
	}
	return false
}

// framesIn is how many frames of typ the gateway read, by its metrics.
func framesIn(t *testing.T, m *metrics.Metrics, typ string) int {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "gateway_frames_received_total" {
			continue
		}
		for _, c := range f.GetMetric() {
			for _, l := range c.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return int(c.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}
