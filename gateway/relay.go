package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/lazylog"
	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Relay carries a page between gateway nodes over NATS, so any node serves
// any browser: a page connected to a node that does not run its session is
// piped, frame for frame, to the node that does, which serves it as one of
// its own pages (the same conn, on a remote socket). The node the page is
// connected to does not read the protocol; it moves frames, in order, and
// closes the socket with the code the serving node closes with.
//
// Subjects: gateway.relay.<node>.open (a node's requests to serve a page;
// an empty one asks whether the node is there, nodeWatch),
// gateway.relay.<node>.delete (a node's deletions of the chats this one
// runs, relaydelete.go), and per page, <pipe>.in (the page's frames), <pipe>.out (the frames for
// the page), <pipe>.ping and <pipe>.oping (each side's liveness). A frame
// with the header Gateway-Close ends the pipe: "<code> <reason>"; one with
// Gateway-Part is part of a frame (relayparts.go), one with Gateway-Sync
// compares what went through after a node was away from NATS
// (relaysync.go).
type Relay struct {
	nc   *nats.Conn
	node string
	// instance names this process among the runs of node: a node
	// restarted under its name answers with another, and the pipes the
	// dead process served move at once (runWatch).
	instance string

	mu     sync.Mutex
	sub    *nats.Subscription
	delSub *nats.Subscription // other nodes' deletions (relaydelete.go)
	// deletes are the deletions delSub runs; stopDeletes cancels them.
	deletes     sync.WaitGroup
	stopDeletes context.CancelFunc
	nodes       map[string]*nodeWatch // the nodes serving this node's pages
	pipes       map[*pipe]struct{}    // this node's pages another node serves
	// back says when the NATS client is connected again after it was
	// away (comeBack); nil when the relay does not serve.
	back     chan nats.Status
	watching sync.WaitGroup
}

// NewRelay returns a relay for this node on nc; the Server that gets it in
// Options.Relay serves other nodes' pages through it.
func NewRelay(nc *nats.Conn, node string) *Relay {
	return &Relay{nc: nc, node: node, instance: nuid.Next()}
}

// ErrNodeNameTaken: another gateway node of this name is running.
var ErrNodeNameTaken = errors.New("another gateway node of this name is running")

// CheckName asks whether a gateway node of this relay's name is running on
// its NATS already: two nodes of one name would each take the other's
// sessions for their own (a lease names its node). It returns
// ErrNodeNameTaken when one answers; a node that does not answer in 2 s,
// or no NATS, is not one.
func (r *Relay) CheckName(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := r.nc.RequestWithContext(ctx, openSubject(r.node), nil); err == nil {
		return fmt.Errorf("%w: %q answers on this NATS; give each node its own --node-id (GATEWAY_NODE_ID)", ErrNodeNameTaken, r.node)
	}
	return nil
}

const closeHeader = "Gateway-Close"

func openSubject(node string) string { return "gateway.relay." + node + ".open" }

type relayOpen struct {
	Pipe    string `json:"pipe"`
	Browser string `json:"browser"`
	Remote  string `json:"remote"`
	// Parts: the page's node joins frames sent in parts (relayparts.go).
	// A node of an earlier version does not say so, and would hand each
	// part to the browser as a frame: its pages get frames whole or not
	// at all.
	Parts bool `json:"parts,omitempty"`
	// Sync: the page's node takes syncs, and sends them (relaysync.go).
	Sync bool `json:"sync,omitempty"`
}

// serve answers other nodes' requests to serve their pages, until stop.
func (r *Relay) serve(s *Server) error {
	sub, err := r.nc.Subscribe(openSubject(r.node), func(m *nats.Msg) {
		var req relayOpen
		// Every answer names this process (the node watch's empty
		// question gets the first).
		answer := func(fields string) {
			_ = m.Respond([]byte(`{` + fields + `,"instance":` + strconv.Quote(r.instance) + `}`))
		}
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Pipe == "" || strings.ContainsAny(req.Pipe, " *>") {
			answer(`"error":"bad request"`)
			return
		}
		sock, err := newRemoteSocket(r.nc, req.Pipe, s.logger.With("remote", req.Remote, "relayed", true))
		if err != nil {
			answer(`"error":` + strconv.Quote(err.Error()))
			return
		}
		sock.parts, sock.sync = req.Parts, req.Sync
		// The answer says this node joins the page's frames sent in parts,
		// and takes syncs.
		answer(`"ok":true,"parts":true,"sync":true`)
		go s.serveRemote(sock, req.Browser, req.Remote)
	})
	if err != nil {
		return fmt.Errorf("failed to serve relayed pages: %w", err)
	}
	delSub, err := r.serveDeletes(s)
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("failed to serve other nodes' deletions: %w", err)
	}
	r.mu.Lock()
	r.sub, r.delSub = sub, delSub
	r.back = r.nc.StatusChanged(nats.CONNECTED)
	r.watching.Add(1)
	go r.comeBack(s, r.back)
	r.mu.Unlock()
	return nil
}

// stop refuses new relayed pages, and stops watching the NATS client.
func (r *Relay) stop() {
	r.mu.Lock()
	for _, sub := range []**nats.Subscription{&r.sub, &r.delSub} {
		if *sub != nil {
			_ = (*sub).Unsubscribe()
			*sub = nil
		}
	}
	if r.stopDeletes != nil {
		r.stopDeletes()
	}
	if r.back != nil {
		r.nc.RemoveStatusListener(r.back) // closes it: comeBack returns
		r.back = nil
	}
	r.mu.Unlock()
	r.watching.Wait()
	r.deletes.Wait()
}

// serveRemote serves a page relayed from another node, as serveWS serves a
// socket of this one.
func (s *Server) serveRemote(sock *remoteSocket, browser, remote string) {
	s.serveSocket(sock, nil, browser, lazylog.With(s.logger, "remote", remote, "relayed", true))
}

// remoteSocket is the serving node's end of a pipe: a socket whose frames
// come and go over NATS.
type remoteSocket struct {
	nc     *nats.Conn
	pipe   string
	in     chan *nats.Msg
	inSub  *nats.Subscription
	parts  bool         // the page's node joins frames sent in parts
	sync   bool         // the page's node takes syncs (relaysync.go)
	logger *slog.Logger // what a sync found lost goes to
	joiner frameJoiner  // Read's
	got    uint64       // Read's: the messages read from the page's node
	wmu    sync.Mutex   // a frame's messages, or a sync, at a time
	sent   uint64       // the messages of frames sent to the page's node
	subs   []*nats.Subscription
	once   sync.Once // Close's
	ended  sync.Once // end's: Read ends the pipe too, on its own goroutine
	closed chan struct{}
}

// relayInQueue is how many of a relayed page's frames may wait for the
// serving node's reader. One more is dropped by the NATS client, and the
// page is closed with 1008 (framesLost) to send it again.
var relayInQueue = 1024

// reasonFramesLost closes a relayed page whose frames overflowed a queue
// between the two nodes: it resumes with after, and sends again what was
// not confirmed, as after any reconnect.
const reasonFramesLost = "frames between gateway nodes were lost: reconnect and resume"

// framesLost reports whether the NATS client dropped a message of sub
// (its queue overflowed): what follows has a gap, and must not pass.
func framesLost(sub *nats.Subscription) bool {
	n, err := sub.Dropped()
	return err == nil && n > 0
}

func newRemoteSocket(nc *nats.Conn, pipe string, logger *slog.Logger) (*remoteSocket, error) {
	s := &remoteSocket{nc: nc, pipe: pipe, logger: logger, in: make(chan *nats.Msg, relayInQueue), closed: make(chan struct{})}
	in, err := nc.ChanSubscribe(pipe+".in", s.in)
	if err != nil {
		return nil, err
	}
	s.inSub = in
	// The page's node asks whether this end is alive.
	ping, err := nc.Subscribe(pipe+".oping", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		_ = in.Unsubscribe()
		return nil, err
	}
	s.subs = []*nats.Subscription{in, ping}
	return s, nil
}

var (
	errPipeClosed = errors.New("the relayed page's connection closed")
	errFramesLost = errors.New("the relayed page's frames overflowed the serving node's queue")
)

func (s *remoteSocket) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	for {
		select {
		case m := <-s.in:
			if m.Header.Get(closeHeader) != "" {
				s.end()
				return 0, nil, io.EOF
			}
			if h := m.Header.Get(syncHeader); h != "" {
				if !s.readSync(h) {
					return 0, nil, errFramesLost
				}
				continue
			}
			s.got++
			frame, whole, err := s.joiner.take(m)
			if framesLost(s.inSub) || err != nil {
				_ = s.Close(websocket.StatusCode(engine.CloseTooSlow), reasonFramesLost)
				return 0, nil, errFramesLost
			}
			if whole {
				return websocket.MessageText, frame, nil
			}
		case <-s.closed:
			return 0, nil, errPipeClosed
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

func (s *remoteSocket) Write(_ context.Context, _ websocket.MessageType, p []byte) error {
	select {
	case <-s.closed:
		return errPipeClosed
	default:
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return publishFrame(s.nc, s.pipe+".out", p, s.parts, &s.sent)
}

func (s *remoteSocket) Ping(ctx context.Context) error {
	_, err := s.nc.RequestWithContext(ctx, s.pipe+".ping", nil)
	return err
}

func (s *remoteSocket) Close(code websocket.StatusCode, reason string) error {
	s.once.Do(func() {
		m := nats.NewMsg(s.pipe + ".out")
		m.Header.Set(closeHeader, fmt.Sprintf("%d %s", code, reason))
		_ = s.nc.PublishMsg(m)
		s.end()
	})
	return nil
}

func (s *remoteSocket) CloseNow() error {
	return s.Close(websocket.StatusCode(engine.CloseGoingAway), "")
}

// end stops reading the pipe, once: Close and Read's close from the
// page's node may come together.
func (s *remoteSocket) end() {
	s.ended.Do(func() {
		close(s.closed)
		for _, sub := range s.subs {
			_ = sub.Unsubscribe()
		}
	})
}

// pipe is the page's node's end: the socket's frames go to the node that
// serves the session, its frames come back to the socket. When that node
// dies, stops or lets the session go, the pipe finds where the session runs
// next (this node included: it then serves the page to itself) and
// carries on there from the last event the page got: the page sees a new
// session.opened and the replay, and never reconnects.
type pipe struct {
	r    *Relay
	c    *conn
	open SessionOpen // the page's session.open; its after and epoch move on (p.after, p.epoch)

	mu    sync.Mutex
	id    string
	node  string // the serving node the relay watches for the page (watchNode)
	subs  []*nats.Subscription
	parts bool   // the serving node joins frames sent in parts
	sync  bool   // the serving node takes syncs (relaysync.go)
	sent  uint64 // the messages sent on the pipe id (the page's frames)
	// instance is the serving node's process ("" for an earlier version,
	// which does not say): another answering under its name is a restart.
	instance string
	moving   bool // between two nodes: the page's frames wait
	// reopening: moved, the page's session.open sent for it, and no
	// session.opened back yet.
	reopening bool
	// movedAt: when the page last moved; bounces: the moves in a row that
	// came soon after the one before.
	movedAt time.Time
	bounces int
	waiting [][]byte // the page's frames while moving
	after   int64    // the last event the page was sent
	epoch   string   // the epoch of the last session.opened the page was sent
	ended   bool
	// unconfirmed are the page's messages and cancels sent since the
	// serving node last answered a ping: each asks for one at once
	// (check), and if that node is gone (no responders: its subscriptions
	// went with it) they did not reach it, and go again after the move.
	unconfirmed [][]byte

	check   chan struct{}
	stop    chan struct{}
	stopped sync.WaitGroup
}

// maxWaiting is how many of the page's frames may wait while the pipe moves
// to another node; past it the page is closed and resumes on its own.
const maxWaiting = 256

// pipeTo pipes c's page, which sent open, to node.
func (r *Relay) pipeTo(c *conn, node string, open SessionOpen) (*pipe, error) {
	p := &pipe{r: r, c: c, open: open, after: open.After, epoch: open.Epoch, check: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := p.dial(node); err != nil {
		return nil, err
	}
	if c.s.opts.PingInterval > 0 {
		p.stopped.Add(1)
		go p.watch(c.s.opts.PingInterval)
	}
	return p, nil
}

// dial asks node to serve the page and sends it the page's session.open.
func (p *pipe) dial(node string) error {
	id := "gateway.relay.pipe." + nuid.Next()
	nc := p.r.nc
	var in pipeIn // the subscription's: its callbacks come one at a time
	out, err := nc.Subscribe(id+".out", func(m *nats.Msg) { p.received(id, &in, m) })
	if err != nil {
		return err
	}
	ping, err := nc.Subscribe(id+".ping", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		_ = out.Unsubscribe()
		return err
	}
	req, _ := json.Marshal(relayOpen{Pipe: id, Browser: p.c.browser, Remote: p.r.node, Parts: true, Sync: true})
	// A live node answers at once; one that does not is dead or paused.
	ctx, cancel := context.WithTimeout(p.c.ctx, 2*time.Second)
	defer cancel()
	resp, err := nc.RequestWithContext(ctx, openSubject(node), req)
	var answer struct {
		OK, Parts, Sync bool
		Error, Instance string
	}
	if err == nil {
		if jerr := json.Unmarshal(resp.Data, &answer); jerr != nil || !answer.OK {
			err = fmt.Errorf("node %s refused to serve the page: %s", node, answer.Error)
		}
	}
	if err != nil {
		_ = out.Unsubscribe()
		_ = ping.Unsubscribe()
		return fmt.Errorf("failed to reach node %s: %w", node, err)
	}
	p.mu.Lock()
	if p.ended {
		// The page left while this node was asked: nothing is watched
		// or subscribed for it after its end.
		p.mu.Unlock()
		_ = out.Unsubscribe()
		_ = ping.Unsubscribe()
		return errPipeClosed
	}
	p.id, p.subs, p.parts, p.sync, p.sent = id, []*nats.Subscription{out, ping}, answer.Parts, answer.Sync, 0
	p.instance = answer.Instance
	open := p.open
	open.After, open.Epoch = p.after, p.epoch
	p.watchNode(node) // under p.mu, as end's: never watched after the end
	p.r.addPipe(p)    // the relay's lock inside p.mu, as watchNode's; again on each move
	// Under p.mu, as send's: the page's first frame on the pipe, counted.
	err = publishFrame(nc, id+".in", encodeFrame(FrameSessionOpen, open), p.parts, &p.sent)
	p.mu.Unlock()
	return err
}

// received takes a frame, a part of one, or a sync, from the serving node
// of pipe id.
func (p *pipe) received(id string, in *pipeIn, m *nats.Msg) {
	p.mu.Lock()
	current := id == p.id && !p.ended
	p.mu.Unlock()
	if !current {
		return // from a node the pipe has left
	}
	// The frames for the page wait at this node while its socket is slow
	// (a long chat's replay comes all at once), in the NATS client's queue
	// of the subscription: past its bounds (nats.DefaultSubPendingMsgsLimit
	// and ...BytesLimit) the client drops a frame, and the page resumes from
	// what it has, as a direct page that cannot keep up does. There is no
	// flow control between the nodes: a replay larger than the queue, to
	// a page slower than the nodes' link, would be cut at each try.
	if framesLost(m.Sub) {
		p.lost("relayed page too slow, closing", "queue", nats.DefaultSubPendingMsgsLimit)
		return
	}
	if h := m.Header.Get(closeHeader); h != "" {
		code, reason, _ := strings.Cut(h, " ")
		n, _ := strconv.Atoi(code)
		switch engine.CloseCode(n) {
		case engine.CloseGoingAway, engine.CloseElsewhere:
			// That node stops, or let the session go: it runs elsewhere next.
			p.moveSoon("node closed the page: "+reason, false, id)
		default:
			if p.endFrom(id) {
				p.c.closeAfterReplies(engine.CloseCode(n), reason)
			}
		}
		return
	}
	if h := m.Header.Get(syncHeader); h != "" {
		p.readSync(id, in, h)
		return
	}
	in.got++
	data, whole, err := in.joiner.take(m)
	if err != nil {
		p.lost("relayed page's frames out of order, closing", "err", err)
		return
	}
	if !whole {
		return
	}
	var ev struct {
		Type  string
		Seq   int64
		Epoch string // session.opened's: the page resumes with it, wherever it moves
	}
	_ = json.Unmarshal(data, &ev)
	p.mu.Lock()
	if id != p.id || p.ended {
		// The page moved on meanwhile: judged with the state of its next
		// pipe, an error of this one would refuse that one's open.
		p.mu.Unlock()
		return
	}
	reopening, after := p.reopening, p.after
	switch {
	case ev.Type == engine.FrameSessionOpened:
		p.reopening = false
		p.epoch = ev.Epoch
	case ev.Seq > 0:
		p.after = max(p.after, ev.Seq)
	}
	p.mu.Unlock()
	switch {
	case reopening && ev.Type == FrameError && ev.Seq == 0:
		// The node the page moved to refused the session.open the page
		// never sent (a store that lost its quorum): the page, told
		// nothing it can act on, would wait for good. It reconnects, and
		// its SDK opens the session again after its backoff.
		p.c.logger.Warn("the node the relayed page moved to refused its session: the page reconnects", "session", p.open.Session, "refusal", string(data))
		p.giveUp()
		return
	case ev.Seq > after+1 && ev.Type != engine.FrameSessionOpened:
		// An event between them never came: published while one of the
		// nodes was away from NATS (a server of the cluster died, and its
		// client moved to another), which core NATS does not keep.
		p.lost("relayed page missed an event, closing", "after", after, "got", ev.Seq)
		return
	}
	// No type: the node that serves the page counted the frame, and a
	// cluster's sum counts it once.
	p.c.reply("", data)
}

// moveSoon moves the page from pipe from on a goroutine of its own
// (move), unless it moved from it already, moves, or ended. The move is
// counted under p.mu: close ends the pipe under p.mu before it waits for
// what was counted.
func (p *pipe) moveSoon(why string, resend bool, from string) {
	p.mu.Lock()
	if p.ended || p.moving || p.id != from {
		p.mu.Unlock()
		return
	}
	p.stopped.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.stopped.Done()
		p.move(why, resend, from)
	}()
}

// lost ends the pipe and closes the page, which missed frames, to resume
// from what it has (1008); why and args are the log line's.
func (p *pipe) lost(why string, args ...any) {
	p.c.logger.Warn(why, args...)
	p.end()
	p.c.closeAfterReplies(engine.CloseTooSlow, reasonFramesLost)
}

// send forwards one of the page's frames, or keeps it while the pipe moves.
func (p *pipe) send(frame []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moving {
		if len(p.waiting) >= maxWaiting {
			return errors.New("too many frames while the session moves")
		}
		p.waiting = append(p.waiting, frame)
		return nil
	}
	if err := publishFrame(p.r.nc, p.id+".in", frame, p.parts, &p.sent); err != nil {
		return err
	}
	p.track(frame)
	return nil
}

// track keeps a message or a cancel the serving node was sent until it
// answers a ping: should it be gone, the move sends them again. An answer
// the SDK sends again after a move itself. p.mu is held.
func (p *pipe) track(frame []byte) {
	if mustArrive(frame) && len(p.unconfirmed) < maxWaiting {
		p.unconfirmed = append(p.unconfirmed, frame)
		select {
		case p.check <- struct{}{}:
		default:
		}
	}
}

// mustArrive: frame is a message or a cancel.
func mustArrive(frame []byte) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(frame, &f) == nil && (f.Type == FrameMessage || f.Type == FrameCancel)
}

// move finds where the session runs next and carries the page there, or
// closes it when it cannot (4001: the page reconnects and resumes). It
// leaves pipe from, and does nothing when the page left it already (a
// ping that failed after another check moved the page on). With resend,
// the unconfirmed frames did not reach the node that is gone, and go
// first to the next.
func (p *pipe) move(why string, resend bool, from string) {
	p.mu.Lock()
	if p.moving || p.ended || p.id != from {
		p.mu.Unlock()
		return
	}
	p.moving, p.reopening = true, true
	if resend {
		p.waiting = append(p.unconfirmed, p.waiting...)
	}
	p.unconfirmed = nil
	old := p.subs
	p.subs, p.id = nil, "" // what the node left still sends is not the page's
	p.mu.Unlock()
	for _, sub := range old {
		_ = sub.Unsubscribe()
	}
	// The node left, if it is there after all (slow, or hung and back),
	// lets its copy of the page go, and the calls it held with it.
	leave := nats.NewMsg(from + ".in")
	leave.Header.Set(closeHeader, "1000 the page moved to another node")
	_ = p.r.nc.PublishMsg(leave)
	c := p.c
	c.logger.Info("moving the relayed page", "session", p.open.Session, "why", why)
	// A node that takes the page and lets it go at once (it gave the
	// session up, and its lease, which it could not delete, still names
	// it: a cluster without its quorum) is asked again after a pause
	// that grows, not a thousand times a second.
	p.mu.Lock()
	if !p.movedAt.IsZero() && time.Since(p.movedAt) < 2*time.Second {
		p.bounces++
	} else {
		p.bounces = 0
	}
	bounced, pause := p.bounces > 0, min(50*time.Millisecond<<min(p.bounces, 6), 2*time.Second)
	p.mu.Unlock()
	if bounced {
		select {
		case <-time.After(pause):
		case <-c.ctx.Done():
		}
	}
	deadline := time.Now().Add(time.Minute)
	wait := 100 * time.Millisecond
	for c.ctx.Err() == nil && time.Now().Before(deadline) {
		if err := p.moveOnce(); err == nil {
			p.moved()
			c.logger.Info("relayed page moved", "session", p.open.Session)
			return
		} else if errors.Is(err, errUnknownSession) {
			break
		}
		select {
		case <-time.After(wait):
		case <-c.ctx.Done():
		}
		wait = min(2*wait, 2*time.Second)
	}
	p.giveUp()
}

// giveUp ends the pipe and closes the page with 4001, when it cannot be
// moved in place: it reconnects, and its SDK opens the session again
// wherever it lands, after its backoff.
func (p *pipe) giveUp() {
	p.end()
	p.c.close(engine.CloseElsewhere, "the session's gateway node is gone: reconnect")
}

// moved sends what waited while the pipe moved, and lets send publish
// again. What waited goes before what send publishes next, each whole:
// under p.mu, as send publishes, so no frame of send's lands between the
// parts of one that waited.
func (p *pipe) moved() {
	p.mu.Lock()
	waited := p.waiting
	p.waiting, p.moving, p.movedAt = nil, false, time.Now()
	var failed error
	for _, f := range waited {
		if failed = publishFrame(p.r.nc, p.id+".in", f, p.parts, &p.sent); failed != nil {
			break
		}
		p.track(f) // should the next node die too, the move after it sends them again
	}
	p.mu.Unlock()
	if failed != nil {
		// The page reconnects, and its SDK sends again what was not
		// confirmed, where the frames were dropped.
		p.lost("failed to send a relayed page's frames after its move: closing it to reconnect", "session", p.open.Session, "err", failed)
	}
}

// moveOnce pipes the page to where the session runs now: the node that
// holds its lease, or this one, which takes it.
func (p *pipe) moveOnce() error {
	ctx, cancel := context.WithTimeout(p.c.ctx, 10*time.Second)
	defer cancel()
	_, err := p.c.s.opts.Engine.LoadFor(ctx, p.open.Session, p.c.browser)
	var owned *engine.OwnedElsewhereError
	switch {
	case errors.As(err, &owned):
		return p.dial(owned.Node)
	case errors.Is(err, engine.ErrNoSession), errors.Is(err, engine.ErrSessionClosed), errors.Is(err, engine.ErrCorrupt),
		errors.Is(err, engine.ErrLimitExceeded):
		// Trying again now would not change it (the browser's share of
		// this node is full until one of its chats idles): the page
		// reconnects, and is told why by the node it reaches, and its SDK
		// tries again after its backoff.
		return errUnknownSession
	case err != nil:
		return err
	default:
		return p.dial(p.r.node) // it runs here now: this node serves it
	}
}

// watch moves the page when the serving node stops answering.
func (p *pipe) watch(every time.Duration) {
	defer p.stopped.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-p.check:
		}
		p.mu.Lock()
		id, moving, sent := p.id, p.moving, len(p.unconfirmed)
		p.mu.Unlock()
		if moving {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_, err := p.r.nc.RequestWithContext(ctx, id+".oping", nil)
		cancel()
		if err == nil {
			p.mu.Lock()
			if p.id == id && !p.moving && sent <= len(p.unconfirmed) {
				p.unconfirmed = append([][]byte(nil), p.unconfirmed[sent:]...)
			}
			p.mu.Unlock()
			continue
		}
		// No responders: the node's subscriptions are gone, and with them
		// what was sent since it last answered. A node that is slow to
		// answer may still take them: they do not go again.
		p.move("its node stopped answering: "+err.Error(), errors.Is(err, nats.ErrNoResponders), id)
	}
}

// end stops taking the serving node's frames.
func (p *pipe) end() {
	p.endFrom("")
}

// endFrom ends the pipe if it is still on the pipe from ("": whichever it
// is on), and reports whether it did: a close the node a page moved from
// sent as it moved is not the next node's.
func (p *pipe) endFrom(from string) bool {
	p.mu.Lock()
	if from != "" && (p.id != from || p.ended) {
		p.mu.Unlock()
		return false
	}
	p.ended = true
	subs := p.subs
	p.subs = nil
	p.watchNode("")
	p.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	return true
}

// watchNode has the relay watch node, the page's serving node now, and not
// the one before it ("": none, or this node itself). p.mu is held: the
// relay's lock is taken inside it, never the other way round.
func (p *pipe) watchNode(node string) {
	if node == p.r.node || p.c.s.opts.PingInterval <= 0 {
		node = ""
	}
	if node == p.node {
		return
	}
	if p.node != "" {
		p.r.unwatchNode(p.node, p)
	}
	if node != "" {
		p.r.watchNode(node, p)
	}
	p.node = node
}

// close tells the serving node the page left, and stops.
func (p *pipe) close() {
	select {
	case <-p.stop:
		return
	default:
		close(p.stop)
	}
	p.mu.Lock()
	id := p.id
	p.mu.Unlock()
	if id != "" { // "": between two nodes, the one left was told (move)
		m := nats.NewMsg(id + ".in")
		m.Header.Set(closeHeader, "1000 the page left")
		_ = p.r.nc.PublishMsg(m)
	}
	p.end()
	p.r.removePipe(p)
	p.stopped.Wait()
}
