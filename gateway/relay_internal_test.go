package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/coder/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// hang bounds every wait: a guard against hangs, not a timing assertion.
const hang = 10 * time.Second

// natsConn starts a NATS server on loopback and connects to it; both stop
// with the test.
func natsConn(t *testing.T) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(hang) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// dropOne returns a subscription on subject whose NATS client dropped a
// message: its queue holds one, and two more came.
func dropOne(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, 1<<20); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := nc.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitDropped(t, sub)
	return sub
}

func waitDropped(t *testing.T, sub *nats.Subscription) {
	t.Helper()
	for deadline := time.Now().Add(hang); !framesLost(sub); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the NATS client dropped nothing")
		}
	}
}

// A relayed page's frames that overflow the serving node's queue are not
// lost in silence: the serving node reads no frame after the gap, and
// closes the page with 1008, so it reconnects and sends again what the
// session did not confirm.
func TestRelayedFramesLostOnTheWayIn(t *testing.T) {
	was := relayInQueue
	relayInQueue = 4
	t.Cleanup(func() { relayInQueue = was })
	nc := natsConn(t)
	const pipe = "gateway.relay.pipe.test"
	out, err := nc.SubscribeSync(pipe + ".out")
	if err != nil {
		t.Fatal(err)
	}
	sock, err := newRemoteSocket(nc, pipe, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sock.end)
	for range relayInQueue + 2 {
		if err := nc.Publish(pipe+".in", []byte(`{"type":"tool.result","id":"t1","attempt":1,"result":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitDropped(t, sock.inSub)

	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if _, frame, err := sock.Read(ctx); err == nil {
		t.Fatalf("Read after frames were dropped = %s, want an error", frame)
	}
	m, err := out.NextMsg(hang)
	if err != nil {
		t.Fatalf("nothing sent to the page's node: %v", err)
	}
	if got := m.Header.Get(closeHeader); !strings.HasPrefix(got, "1008 ") {
		t.Errorf("the page's node got %q %s, want a close with 1008", got, m.Data)
	}
}

// A relayed page too slow for the frames its serving node sends, so that
// its node's NATS client drops one, is closed with 1008 to resume from
// what it has, as a direct page that cannot keep up is; no frame after the
// gap reaches it.
func TestRelayedPageTooSlow(t *testing.T) {
	p, page, nc := relayedPage(t, "gateway.relay.pipe.test")
	sub := dropOne(t, nc, p.id+".out")
	receive(p, sub, `{"type":"model.delta","seq":7,"text":"after the gap"}`)
	closedWith(t, page, engine.CloseTooSlow)
	if w := page.written(); len(w) != 0 {
		t.Errorf("the page got %q after frames were dropped", w)
	}
}

// relayedPage is a page on a test server relayed through pipe id; the
// test plays its serving node, handing what that node sends to received
// (receive).
func relayedPage(t *testing.T, id string) (*pipe, *recordingSocket, *nats.Conn) {
	t.Helper()
	nc := natsConn(t)
	page := newRecordingSocket()
	c := openPage(t, testServer(t), page, page)
	return &pipe{r: &Relay{nc: nc, node: "here"}, c: c, id: id, check: make(chan struct{}, 1), stop: make(chan struct{})}, page, nc
}

// outSub subscribes to what p's serving node sends, as the pipe does.
func outSub(t *testing.T, nc *nats.Conn, p *pipe) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(p.id + ".out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

// receive hands p the frames its serving node sent on sub.
func receive(p *pipe, sub *nats.Subscription, frames ...string) {
	for _, f := range frames {
		p.received(p.id, &pipeIn{}, &nats.Msg{Subject: p.id + ".out", Sub: sub, Data: []byte(f)})
	}
}

// closedWith waits for page to be closed, with want.
func closedWith(t *testing.T, page *recordingSocket, want engine.CloseCode) {
	t.Helper()
	select {
	case code := <-page.closed:
		if code != websocket.StatusCode(want) {
			t.Errorf("the page was closed with %d, want %d", code, want)
		}
	case <-time.After(hang):
		t.Fatal("the page was not closed")
	}
}

// TestRelayedPageMissesAnEvent: an event the serving node published while
// one of the nodes was away from NATS (a server of the cluster died, and
// its client moved to another) never comes, and core NATS says nothing of
// it. The page's node sees the gap in the events' seqs and closes the page
// with 1008, to resume from what it has: no event after the gap reaches it.
func TestRelayedPageMissesAnEvent(t *testing.T) {
	p, page, nc := relayedPage(t, "gateway.relay.pipe.gap")
	p.after = 4
	receive(p, outSub(t, nc, p), `{"type":"message","seq":5,"message":{"role":"user","content":"hi"}}`, `{"type":"model.delta","seq":7,"text":"after the gap"}`)
	closedWith(t, page, engine.CloseTooSlow)
	if w := page.written(); len(w) != 1 || !strings.Contains(w[0], `"seq":5`) {
		t.Errorf("the page got %q, want event 5 and nothing after the gap", w)
	}
}

// TestMovedPageRefused: a page its node moved to another node (its serving
// node went) whose session.open, sent for it, that node refuses (a store
// that lost its quorum) is not left on a refusal of an open it never sent,
// and no more frames: it is closed with 4001, and its SDK opens the
// session again, after its backoff, wherever it reconnects.
func TestMovedPageRefused(t *testing.T) {
	p, page, nc := relayedPage(t, "gateway.relay.pipe.refused")
	p.after, p.reopening = 4, true
	receive(p, outSub(t, nc, p), `{"type":"error","code":"store_unavailable","message":"failed to load session s1: nats: no response from stream"}`)
	closedWith(t, page, engine.CloseElsewhere)
	if w := page.written(); len(w) != 0 {
		t.Errorf("the page got %q, want nothing: it sent no session.open", w)
	}
}

// TestRelayedFramesInParts: a frame larger than a NATS message (a large
// tool result, on a server's default max_payload of 1 MiB) crosses between
// the nodes in parts, both ways, and arrives whole and in order with the
// frames around it. It was one message, which NATS refused: the page's
// node took the failed write for a dead node and moved the page, again
// and again.
func TestRelayedFramesInParts(t *testing.T) {
	nc := natsConn(t)
	big := func(seq int) []byte {
		return fmt.Appendf(nil, `{"type":"tool.finished","seq":%d,"result":%q}`, seq, strings.Repeat("x", 5*int(nc.MaxPayload())/2))
	}
	frames := [][]byte{[]byte(`{"type":"message","seq":1}`), big(2), []byte(`{"type":"message","seq":3}`), big(4)}

	// The page's frames, to the serving node's socket.
	const pipeID = "gateway.relay.pipe.test"
	sock, err := newRemoteSocket(nc, pipeID, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sock.end)
	for _, f := range frames {
		var sent uint64
		if err := publishFrame(nc, pipeID+".in", f, true, &sent); err != nil {
			t.Fatalf("publishing a frame of %d bytes: %v", len(f), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	for i, want := range frames {
		_, got, err := sock.Read(ctx)
		if err != nil || string(got) != string(want) {
			t.Fatalf("frame %d read by the serving node: %d bytes, %v; want %d bytes", i+1, len(got), err, len(want))
		}
	}

	// The serving node's frames, to the page.
	s := testServer(t)
	page := newRecordingSocket()
	c := openPage(t, s, page, page)
	p := &pipe{r: &Relay{nc: nc, node: "here"}, c: c, id: pipeID + "2", check: make(chan struct{}, 1), stop: make(chan struct{})}
	var in pipeIn
	sub, err := nc.Subscribe(p.id+".out", func(m *nats.Msg) { p.received(p.id, &in, m) })
	if err != nil {
		t.Fatal(err)
	}
	out := &remoteSocket{nc: nc, pipe: p.id, parts: true, closed: make(chan struct{})}
	for _, f := range frames {
		if err := out.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatalf("writing a frame of %d bytes: %v", len(f), err)
		}
	}
	for deadline := time.Now().Add(hang); len(page.written()) < len(frames); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the page got %d frames, want %d", len(page.written()), len(frames))
		}
	}
	for i, got := range page.written() {
		if got != string(frames[i]) {
			t.Errorf("frame %d written to the page: %d bytes, want %d", i+1, len(got), len(frames[i]))
		}
	}
	if p.after != 4 {
		t.Errorf("the page resumes after %d, want 4", p.after)
	}
	_ = sub.Unsubscribe()
}

// TestFramesAfterAMoveComeWhole: a page's frame that waited while its pipe
// moved, large enough to go in parts, reaches the serving node whole and
// first, although the page sends more as the move ends. The frames that
// waited were sent after the pipe stopped moving, without its lock, so a
// frame send published could land between their parts, and the serving
// node closed the page for frames lost.
func TestFramesAfterAMoveComeWhole(t *testing.T) {
	nc := natsConn(t)
	big := fmt.Appendf(nil, `{"type":"tool.result","id":"t1","attempt":1,"result":%q}`, strings.Repeat("x", 3*int(nc.MaxPayload())))
	small := []byte(`{"type":"cancel"}`)
	for round := range 20 {
		id := fmt.Sprintf("gateway.relay.pipe.move%d", round)
		sock, err := newRemoteSocket(nc, id, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		p := &pipe{r: &Relay{nc: nc, node: "here"}, id: id, parts: true, moving: true, waiting: [][]byte{big}, check: make(chan struct{}, 1)}
		done := make(chan struct{})
		go func() { defer close(done); p.moved() }()
		// The page sends as soon as the pipe has stopped moving.
		for func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.moving }() {
			runtime.Gosched()
		}
		if err := p.send(small); err != nil {
			t.Fatal(err)
		}
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		for i, want := range [][]byte{big, small} {
			_, got, err := sock.Read(ctx)
			if err != nil || string(got) != string(want) {
				t.Fatalf("round %d, frame %d at the serving node: %d bytes, %v; want %d bytes", round+1, i+1, len(got), err, len(want))
			}
		}
		cancel()
		sock.end()
	}
}

// TestLargeFrameToAnEarlierNode: a node of an earlier version joins no
// parts, and says nothing of them when it asks for a page to be served or
// answers such a request. A frame too large for one NATS message is then
// not sent in parts, which that node would hand the browser as frames of
// their own (broken JSON, a split character, events the page skipped for
// good): the serving node closes the page with 1008 to reconnect, rather
// than 1001, which has the page's node move it back again; the page's node
// fails the frame's send, as it did.
func TestLargeFrameToAnEarlierNode(t *testing.T) {
	nc := natsConn(t)
	big := fmt.Appendf(nil, `{"type":"tool.finished","seq":9,"result":%q}`, strings.Repeat("é", int(nc.MaxPayload())))
	const pipeID = "gateway.relay.pipe.earlier"
	out, err := nc.SubscribeSync(pipeID + ".out")
	if err != nil {
		t.Fatal(err)
	}
	sock := &remoteSocket{nc: nc, pipe: pipeID, closed: make(chan struct{})} // its page's node said no parts
	if err := sock.Write(context.Background(), websocket.MessageText, big); !errors.Is(err, errNoParts) {
		t.Fatalf("a large frame to a page on an earlier node: %v, want errNoParts", err)
	}
	if m, err := out.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("%d bytes were published for the page all the same", len(m.Data))
	}

	s := testServer(t)
	page := &noPartsSocket{newRecordingSocket()}
	c := openPage(t, s, page, page.recordingSocket)
	if c.writeFrame(big, false) {
		t.Fatal("the write of a frame the page's node cannot take went through")
	}
	select {
	case code := <-page.closed:
		if code != websocket.StatusCode(engine.CloseTooSlow) {
			t.Errorf("the page was closed with %d, want %d (reconnect), not moved", code, engine.CloseTooSlow)
		}
	case <-time.After(hang):
		t.Fatal("the page was not closed")
	}

	p := &pipe{r: &Relay{nc: nc, node: "here"}, id: pipeID, check: make(chan struct{}, 1)} // its serving node said no parts
	if err := p.send(big); !errors.Is(err, errNoParts) {
		t.Errorf("a large page frame to an earlier serving node: %v, want errNoParts", err)
	}
}

// TestRelayNodesAgreeOnParts: a node of this version asks for its page to
// be served saying it joins parts and takes syncs, and the serving node
// answers that it does too: each side then sends large frames in parts,
// and syncs when it is connected to NATS again (relaysync.go).
func TestRelayNodesAgreeOnParts(t *testing.T) {
	nc := natsConn(t)
	owner := testServer(t)
	r := NewRelay(nc, "owner")
	if err := r.serve(owner); err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	req, _ := json.Marshal(relayOpen{Pipe: "gateway.relay.pipe.agree", Browser: "b", Remote: "page", Parts: true, Sync: true})
	resp, err := nc.Request(openSubject("owner"), req, hang)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		OK, Parts, Sync bool
		Instance        string
	}
	if err := json.Unmarshal(resp.Data, &answer); err != nil || !answer.OK || !answer.Parts || !answer.Sync || answer.Instance != r.instance {
		t.Errorf("the serving node answered %s, want one that says it joins parts and takes syncs, and names its process", resp.Data)
	}
	_ = nc.Publish("gateway.relay.pipe.agree.in", nil) // an empty frame, then the page leaves
	m := nats.NewMsg("gateway.relay.pipe.agree.in")
	m.Header.Set(closeHeader, "1000 the page left")
	_ = nc.PublishMsg(m)

	pageNode := testServer(t)
	page := newRecordingSocket()
	c := openPage(t, pageNode, page, page)
	p := &pipe{r: &Relay{nc: nc, node: "page"}, c: c, check: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := p.dial("owner"); err != nil {
		t.Fatal(err)
	}
	if !p.parts || !p.sync {
		t.Errorf("the page's pipe sends parts %v, syncs %v, to a serving node that takes both", p.parts, p.sync)
	}
	p.close()
}

// noPartsSocket is a page on a node of an earlier version, whose frames
// go whole or not at all.
type noPartsSocket struct{ *recordingSocket }

func (*noPartsSocket) Write(context.Context, websocket.MessageType, []byte) error { return errNoParts }

// TestFrameJoinerRefusesPartsOutOfOrder: a part that is not the one due
// (the pipe lost one) is an error, not a frame joined wrong.
func TestFrameJoinerRefusesPartsOutOfOrder(t *testing.T) {
	part := func(h string) *nats.Msg {
		m := nats.NewMsg("x")
		m.Data = []byte("ab")
		if h != "" {
			m.Header.Set(partHeader, h)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		msgs []*nats.Msg
	}{
		{"a part skipped", []*nats.Msg{part("1/3"), part("3/3")}},
		{"a frame amid parts", []*nats.Msg{part("1/2"), part("")}},
		{"a part with no first", []*nats.Msg{part("2/2")}},
		{"a count that changed", []*nats.Msg{part("1/2"), part("2/3")}},
		{"a bad number", []*nats.Msg{part("one/2")}},
		// A count whose room would overflow: refused later, never a panic
		// in a NATS callback, which nothing recovers.
		{"a count past any frame", []*nats.Msg{part("1/4611686018427387904"), part("")}},
	} {
		var j frameJoiner
		var err error
		for _, m := range tc.msgs {
			if _, _, err = j.take(m); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: joined without an error", tc.name)
		}
	}
}

// testServer is a gateway on a memory store whose model says nothing.
func testServer(t *testing.T) *Server {
	t.Helper()
	quiet := model.Func(func(context.Context, model.Request, func(string)) (model.Response, error) {
		return model.Response{StopReason: model.StopEndTurn}, nil
	})
	eng, err := engine.New(engine.Options{
		Worker: &engine.ToolWorker{Agent: engine.AgentConfig{Model: "quiet"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return quiet, nil }),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Engine: eng, Logger: slog.New(slog.DiscardHandler), PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := eng.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// openPage opens a connection on s for sock, a page that page records,
// torn down when t ends.
func openPage(t *testing.T, s *Server, sock socket, page *recordingSocket) *conn {
	t.Helper()
	c, ok := s.openConn(sock, nil, "browser", s.logger)
	if !ok {
		t.Fatal("the gateway took no connection")
	}
	t.Cleanup(func() {
		close(page.gone)
		c.cancel()
		c.writers.Wait()
		s.untrack(c)
	})
	return c
}

func newRecordingSocket() *recordingSocket {
	return &recordingSocket{closed: make(chan websocket.StatusCode, 1), gone: make(chan struct{})}
}

// recordingSocket is a page that records what it is sent and how it is
// closed.
type recordingSocket struct {
	mu     sync.Mutex
	writes []string
	closed chan websocket.StatusCode
	gone   chan struct{}
}

func (r *recordingSocket) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	select {
	case <-r.gone:
		return 0, nil, errPipeClosed
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

func (r *recordingSocket) Write(_ context.Context, _ websocket.MessageType, p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return nil
}

func (r *recordingSocket) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func (r *recordingSocket) Ping(context.Context) error { return nil }

func (r *recordingSocket) Close(code websocket.StatusCode, _ string) error {
	select {
	case r.closed <- code:
	default:
	}
	return nil
}

func (r *recordingSocket) CloseNow() error {
	return r.Close(websocket.StatusCode(engine.CloseGoingAway), "")
}

// TestAMoveLeavesOnlyThePipeItMeant: a check that judged the page's
// serving node gone (a ping that failed, a silent node's lease read)
// moves the page from the pipe it checked, and does nothing once the
// page left that pipe: a ping to a hung node, in flight as another check
// moved the page, failed after, and moved it again, off the node that
// runs its session, its copy left holding the call there.
func TestAMoveLeavesOnlyThePipeItMeant(t *testing.T) {
	p, page, _ := relayedPage(t, "gateway.relay.pipe.now")
	p.move("a ping to the node before failed", true, "gateway.relay.pipe.before")
	p.moveSoon("a ping to the node before failed", true, "gateway.relay.pipe.before")
	p.stopped.Wait()
	p.mu.Lock()
	id, moving := p.id, p.moving
	p.mu.Unlock()
	if id != "gateway.relay.pipe.now" || moving {
		t.Errorf("after a move from a pipe the page had left: pipe %q, moving %v; want the page where it is", id, moving)
	}
	select {
	case code := <-page.closed:
		t.Errorf("the page was closed with %d", code)
	default:
	}
}

// TestRelayedPageEndsOnce: a relayed page's close from its own node (Read)
// and the serving node's close of it (Close) may end the pipe together;
// the second must not close its channel again, which panicked and took the
// serving node down with every session it ran.
func TestRelayedPageEndsOnce(t *testing.T) {
	nc := natsConn(t)
	for i := range 2000 {
		in := make(chan *nats.Msg, 1)
		sock := &remoteSocket{nc: nc, pipe: fmt.Sprintf("gateway.relay.pipe.ends.%d", i), in: in, closed: make(chan struct{})}
		closeMsg := nats.NewMsg(sock.pipe + ".in")
		closeMsg.Header.Set(closeHeader, "1001 going")
		in <- closeMsg
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_, _, _ = sock.Read(context.Background())
		})
		wg.Go(func() {
			<-start
			_ = sock.Close(websocket.StatusNormalClosure, "")
		})
		close(start)
		wg.Wait()
	}
}

// TestFramesAfterAMoveTracked: the messages and cancels that waited while a
// relayed page moved are tracked once sent to the next node, as those sent
// after: should that node die too, the move after it sends them again. They
// were sent untracked, and a message was lost until the page reloaded.
func TestFramesAfterAMoveTracked(t *testing.T) {
	nc := natsConn(t)
	const pipeID = "gateway.relay.pipe.moved"
	in, err := nc.SubscribeSync(pipeID + ".in")
	if err != nil {
		t.Fatal(err)
	}
	message := []byte(`{"type":"message","content":"hi","id":"m1"}`)
	answer := []byte(`{"type":"tool.result","id":"call_1","attempt":1,"result":{}}`)
	p := &pipe{r: &Relay{nc: nc, node: "here"}, id: pipeID, check: make(chan struct{}, 1), moving: true,
		waiting: [][]byte{message, answer}}
	p.moved()
	for _, want := range [][]byte{message, answer} {
		m, err := in.NextMsg(hang)
		if err != nil || !bytes.Equal(m.Data, want) {
			t.Fatalf("the next node got %s, %v; want %s", m.Data, err, want)
		}
	}
	if len(p.unconfirmed) != 1 || !bytes.Equal(p.unconfirmed[0], message) {
		t.Errorf("tracked after the move: %q, want the message alone (the SDK sends an answer again itself)", p.unconfirmed)
	}
	if p.moving || len(p.waiting) != 0 {
		t.Errorf("moving %v with %d frames waiting, after the move", p.moving, len(p.waiting))
	}
}
