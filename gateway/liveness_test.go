package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

func TestHealthz(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	b.open(pageTools)
	resp, err := b.client.Get(h.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var health struct {
		Status      string `json:"status"`
		Sessions    int    `json:"sessions"`
		Connections int    `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || health.Status != "ok" || health.Sessions != 1 || health.Connections != 1 {
		t.Errorf("GET /healthz = %s %+v; want 200, ok, 1 session, 1 connection", resp.Status, health)
	}
}

func TestShutdownClosesSockets(t *testing.T) {
	tests := []struct {
		name string
		// busy leaves a write in flight: the page stops reading while a
		// long reply streams.
		busy bool
	}{
		{"idle connection", false},
		{"write in flight", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{
				gateway:  gateway.Options{SendQueue: 4 * floodDeltas},
				listener: smallSendBuffers,
			})
			b := h.newBrowser(smallReadBuffers())
			c, id := b.open(pageTools)
			if tc.busy {
				c.say("flood")
				waitPublished(t, h, id, floodDeltas)
			}
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), hang)
				defer cancel()
				done <- h.gw.Shutdown(ctx)
			}()
			if code := c.untilClosed(); code != websocket.StatusGoingAway {
				t.Errorf("close status = %v, want %v", code, websocket.StatusGoingAway)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			case <-time.After(hang):
				t.Fatal("Shutdown did not return")
			}
			// A socket upgraded after Shutdown is closed at once.
			late := b.dial(nil)
			if code := late.untilClosed(); code != websocket.StatusGoingAway {
				t.Errorf("socket after Shutdown: close status %v, want %v", code, websocket.StatusGoingAway)
			}
		})
	}
}

// waitPublished waits until session id has published at least n events.
func waitPublished(t *testing.T, h *harness, id string, n int64) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for h.session(id).LastSeq() < n {
		if time.Now().After(deadline) {
			t.Fatalf("session published %d events, want %d", h.session(id).LastSeq(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKeepalivePing(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{PingInterval: 20 * time.Millisecond}})
	c, id := h.newBrowser(nil).open(pageTools)
	// The page stops reading, so it answers no ping.
	h.logs.wait(t, "stopped answering pings")
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, "stopped answering pings") && !strings.Contains(line, "session="+id) {
			t.Errorf("the connection's line names no session, once open: %s", line)
		}
	}
	if code := c.untilClosed(); code != websocket.StatusCode(engine.CloseUnresponsive) {
		t.Errorf("close status = %v, want %v", code, engine.CloseUnresponsive)
	}
}

// TestNoPongWhileTheSessionOpens: a page whose session.open waits on the
// session (here the worker's session.start; a load from a slow store
// alike) is not closed for missed pings: the gateway reads no pong while
// it waits, and the page is not the one that stopped.
func TestNoPongWhileTheSessionOpens(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, harnessOptions{
		gateway: gateway.Options{PingInterval: 100 * time.Millisecond},
		worker: func(w engine.Worker) engine.Worker {
			return engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				if _, ok := req.Trigger.(engine.SessionStart); ok {
					<-release
				}
				return w.Decide(ctx, req)
			})
		},
	})
	c := h.newBrowser(nil).dial(nil)
	c.send(map[string]any{"type": "session.open", "tools": pageTools})
	opened := make(chan frame, 1)
	go func() { opened <- c.untilType("session.opened") }() // reading: the page answers pings
	h.logs.wait(t, "no pong while the reader waits on the session")
	close(release)
	<-opened
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("the page's reply after its slow open: %q", got)
	}
}

func mustJar(t *testing.T) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}
