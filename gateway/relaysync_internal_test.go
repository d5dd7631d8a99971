package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/testlog"
	"github.com/nats-io/nats.go"
)

// A relayed page's frame lost while a node was away from NATS (an answer,
// a tool.call: frames with no seq to show the gap) is found by the sync
// that follows the node's return, on either side of the pipe, and the page
// is closed with 1008 to resume and send again what the session did not
// confirm; when nothing was lost, an ask is answered with what its reader
// sent, and the page goes on.
func TestRelaySyncFindsLostFrames(t *testing.T) {
	tests := []struct {
		name      string
		sent      int    // the frames the other side says it sent before its ask
		wantClose bool   // the page is closed with 1008
		wantReply string // the sync that answers the ask, when it is whole
	}{
		{name: "whole", sent: 1, wantReply: "answer 2"}, // the reader sent two before it
		{name: "one lost", sent: 2, wantClose: true},
	}
	for _, tt := range tests {
		t.Run("the serving node reads "+tt.name, func(t *testing.T) {
			nc := natsConn(t)
			pipeID := "gateway.relay.pipe.owner"
			out := subscribeSync(t, nc, pipeID+".out")
			logs := &testlog.Buffer{}
			sock, err := newRemoteSocket(nc, pipeID, slog.New(slog.NewTextHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sock.end)
			sock.sync = true
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			for _, f := range []string{`{"type":"tool.call","id":"t1","attempt":1}`, `{"type":"tool.started","seq":2}`} {
				if err := sock.Write(ctx, 1, []byte(f)); err != nil {
					t.Fatal(err)
				}
				if m := next(t, out); m.Header.Get(syncHeader) != "" {
					t.Fatalf("the page's node got %q, want the frame", m.Header.Get(syncHeader))
				}
			}
			publish(t, nc, pipeID+".in", nil, `{"type":"tool.result","id":"t1","attempt":1,"result":1}`)
			publish(t, nc, pipeID+".in", syncMsg(pipeID+".in", syncAsk, uint64(tt.sent)), "")
			publish(t, nc, pipeID+".in", nil, `{"type":"message","content":"after the ask"}`)
			if _, got, err := sock.Read(ctx); err != nil || string(got) != `{"type":"tool.result","id":"t1","attempt":1,"result":1}` {
				t.Fatalf("first Read = %s, %v; want the answer", got, err)
			}
			_, got, err := sock.Read(ctx)
			m := next(t, out)
			if tt.wantClose {
				if err == nil {
					t.Errorf("Read after an ask that says a frame is missing = %s, want an error", got)
				}
				if h := m.Header.Get(closeHeader); h != fmt.Sprintf("%d %s", engine.CloseTooSlow, reasonFramesLost) {
					t.Errorf("the page's node got %q (sync %q), want a close with 1008", h, m.Header.Get(syncHeader))
				}
				if !strings.Contains(logs.String(), "frames were lost while a node was away from NATS") {
					t.Errorf("the serving node's log does not say what the sync found:\n%s", logs.String())
				}
				return
			}
			if err != nil || string(got) != `{"type":"message","content":"after the ask"}` {
				t.Errorf("Read after a whole ask = %s, %v; want the next frame", got, err)
			}
			if h := m.Header.Get(syncHeader); h != tt.wantReply {
				t.Errorf("the page's node got sync %q (close %q), want %q", h, m.Header.Get(closeHeader), tt.wantReply)
			}
		})
		t.Run("the page's node reads "+tt.name, func(t *testing.T) {
			p, page, nc := relayedPage(t, "gateway.relay.pipe.page")
			p.sync = true
			in := subscribeSync(t, nc, p.id+".in")
			for _, f := range []string{`{"type":"tool.result","id":"t1","attempt":1,"result":1}`, `{"type":"message","content":"hi"}`} {
				if err := p.send([]byte(f)); err != nil {
					t.Fatal(err)
				}
				next(t, in)
			}
			var r pipeIn
			p.received(p.id, &r, &nats.Msg{Subject: p.id + ".out", Data: []byte(`{"type":"tool.call","id":"t2","attempt":1}`)})
			p.received(p.id, &r, syncMsg(p.id+".out", syncAsk, uint64(tt.sent)))
			if tt.wantClose {
				closedWith(t, page, engine.CloseTooSlow)
				return
			}
			if h := next(t, in).Header.Get(syncHeader); h != tt.wantReply {
				t.Errorf("the serving node got sync %q, want %q", h, tt.wantReply)
			}
			select {
			case code := <-page.closed:
				t.Errorf("the page was closed with %d after a whole ask", code)
			default:
			}
		})
	}
}

// TestRelayFindsWhatWasLostWhileANodeWasAway: a frame published while
// one node of a pipe was away from NATS is lost for good (core NATS keeps
// nothing for a subscriber that is away), and when it carries no seq (a
// page's answer, a tool.call) nothing showed it: its call waited for its
// attempt's timeout. Now the node that is connected again asks the other
// side of each of its pipes to compare what went through, and the page is
// closed with 1008, to resume and send again what the session did not
// confirm. The loss is played by counting a frame that was never sent.
func TestRelayFindsWhatWasLostWhileANodeWasAway(t *testing.T) {
	for _, back := range []string{"the serving node", "the page's node"} {
		t.Run(back, func(t *testing.T) {
			ownerNC := natsConn(t)
			pageNC, err := nats.Connect(ownerNC.ConnectedUrl())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pageNC.Close)
			owner, pageNode := testServer(t), testServer(t)
			relays := map[string]*Relay{"owner": NewRelay(ownerNC, "owner"), "page": NewRelay(pageNC, "page")}
			for name, r := range relays {
				s := owner
				if name == "page" {
					s = pageNode
				}
				if err := r.serve(s); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(r.stop)
				if err := r.nc.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			page := newRecordingSocket()
			c := openPage(t, pageNode, page, page)
			p := &pipe{r: relays["page"], c: c, check: make(chan struct{}, 1), stop: make(chan struct{})}
			if err := p.dial("owner"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.close)
			for deadline := time.Now().Add(hang); !strings.Contains(strings.Join(page.written(), ""), `"session.opened"`); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the relayed page did not open")
				}
			}

			nc := ownerNC
			if back == "the serving node" {
				p.mu.Lock()
				p.sent++ // the page's answer, lost on the way to the serving node
				p.mu.Unlock()
			} else {
				sock := owner.relayedConns()[0].ws.(*remoteSocket)
				sock.wmu.Lock()
				sock.sent++ // a tool.call, lost on the way to the page's node
				sock.wmu.Unlock()
				nc = pageNC
			}
			if err := nc.ForceReconnect(); err != nil {
				t.Fatal(err)
			}
			closedWith(t, page, engine.CloseTooSlow)
		})
	}
}

// TestRelayAsksNoEarlierNode: a pipe to or from a node of an earlier
// version, which would take a sync for a frame, is asked nothing.
func TestRelayAsksNoEarlierNode(t *testing.T) {
	nc := natsConn(t)
	earlier := &pipe{r: NewRelay(nc, "here"), id: "gateway.relay.pipe.earlier", check: make(chan struct{}, 1), stop: make(chan struct{})}
	if earlier.ask() {
		t.Error("a pipe to a node of an earlier version was asked")
	}
	sock := &remoteSocket{nc: nc, pipe: "gateway.relay.pipe.earlier2", closed: make(chan struct{})}
	if sock.ask() {
		t.Error("a page of a node of an earlier version was asked")
	}
}

func subscribeSync(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(hang)
	if err != nil {
		t.Fatalf("nothing on %s: %v", sub.Subject, err)
	}
	return m
}

// publish publishes m, or data on subject when m is nil.
func publish(t *testing.T, nc *nats.Conn, subject string, m *nats.Msg, data string) {
	t.Helper()
	if m == nil {
		m = &nats.Msg{Subject: subject, Data: []byte(data)}
	}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}
