package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
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
// Subjects: gateway.relay.<node>.open (a node's requests to serve a page),
// and per page, <pipe>.in (the page's frames), <pipe>.out (the frames for
// the page), <pipe>.ping and <pipe>.oping (each side's liveness). A frame
// with the header Gateway-Close ends the pipe: "<code> <reason>".
type Relay struct {
	nc   *nats.Conn
	node string

	mu  sync.Mutex
	sub *nats.Subscription
}

// NewRelay returns a relay for this node on nc; the Server that gets it in
// Options.Relay serves other nodes' pages through it.
func NewRelay(nc *nats.Conn, node string) *Relay { return &Relay{nc: nc, node: node} }

const closeHeader = "Gateway-Close"

func openSubject(node string) string { return "gateway.relay." + node + ".open" }

type relayOpen struct {
	Pipe    string `json:"pipe"`
	Browser string `json:"browser"`
	Remote  string `json:"remote"`
}

// serve answers other nodes' requests to serve their pages, until stop.
func (r *Relay) serve(s *Server) error {
	sub, err := r.nc.Subscribe(openSubject(r.node), func(m *nats.Msg) {
		var req relayOpen
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Pipe == "" || strings.ContainsAny(req.Pipe, " *>") {
			_ = m.Respond([]byte(`{"error":"bad request"}`))
			return
		}
		sock, err := newRemoteSocket(r.nc, req.Pipe)
		if err != nil {
			_ = m.Respond([]byte(`{"error":` + strconv.Quote(err.Error()) + `}`))
			return
		}
		_ = m.Respond([]byte(`{"ok":true}`))
		go s.serveRemote(sock, req.Browser, req.Remote)
	})
	if err != nil {
		return fmt.Errorf("failed to serve relayed pages: %w", err)
	}
	r.mu.Lock()
	r.sub = sub
	r.mu.Unlock()
	return nil
}

// stop refuses new relayed pages.
func (r *Relay) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
}

// serveRemote serves a page relayed from another node, as serveWS serves a
// socket of this one.
func (s *Server) serveRemote(sock *remoteSocket, browser, remote string) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, ws: sock, browser: browser,
		logger: s.logger.With("remote", remote, "relayed", true),
		ctx:    ctx, cancel: cancel,
		closed: make(chan struct{}),
		room:   make(chan struct{}, 1),
	}
	if !s.track(c) {
		_ = sock.Close(websocket.StatusCode(engine.CloseGoingAway), "the gateway is shutting down")
		cancel()
		return
	}
	defer s.untrack(c)
	c.serve()
}

// remoteSocket is the serving node's end of a pipe: a socket whose frames
// come and go over NATS.
type remoteSocket struct {
	nc     *nats.Conn
	pipe   string
	in     chan *nats.Msg
	subs   []*nats.Subscription
	once   sync.Once
	closed chan struct{}
}

func newRemoteSocket(nc *nats.Conn, pipe string) (*remoteSocket, error) {
	s := &remoteSocket{nc: nc, pipe: pipe, in: make(chan *nats.Msg, 1024), closed: make(chan struct{})}
	in, err := nc.ChanSubscribe(pipe+".in", s.in)
	if err != nil {
		return nil, err
	}
	// The page's node asks whether this end is alive.
	ping, err := nc.Subscribe(pipe+".oping", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		_ = in.Unsubscribe()
		return nil, err
	}
	s.subs = []*nats.Subscription{in, ping}
	return s, nil
}

var errPipeClosed = errors.New("the relayed page's connection closed")

func (s *remoteSocket) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	select {
	case m := <-s.in:
		if m.Header.Get(closeHeader) != "" {
			s.end()
			return 0, nil, io.EOF
		}
		return websocket.MessageText, m.Data, nil
	case <-s.closed:
		return 0, nil, errPipeClosed
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

func (s *remoteSocket) Write(_ context.Context, _ websocket.MessageType, p []byte) error {
	select {
	case <-s.closed:
		return errPipeClosed
	default:
	}
	return s.nc.Publish(s.pipe+".out", p)
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

// end stops reading the pipe.
func (s *remoteSocket) end() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}

// pipe is the page's node's end: the socket's frames go to the serving
// node, its frames come back to the socket.
type pipe struct {
	nc      *nats.Conn
	id      string
	subs    []*nats.Subscription
	stop    chan struct{}
	stopped sync.WaitGroup
}

// dial asks node to serve c's page, and pipes c to it.
func (r *Relay) dial(c *conn, node string) (*pipe, error) {
	p := &pipe{nc: r.nc, id: "gateway.relay.pipe." + nuid.Next(), stop: make(chan struct{})}
	out, err := r.nc.Subscribe(p.id+".out", func(m *nats.Msg) {
		if h := m.Header.Get(closeHeader); h != "" {
			code, reason, _ := strings.Cut(h, " ")
			n, _ := strconv.Atoi(code)
			c.closeAfterReplies(engine.CloseCode(n), reason)
			return
		}
		c.reply(m.Data)
	})
	if err != nil {
		return nil, err
	}
	ping, err := r.nc.Subscribe(p.id+".ping", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		_ = out.Unsubscribe()
		return nil, err
	}
	p.subs = []*nats.Subscription{out, ping}
	req, _ := json.Marshal(relayOpen{Pipe: p.id, Browser: c.browser, Remote: r.node})
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	resp, err := r.nc.RequestWithContext(ctx, openSubject(node), req)
	if err == nil {
		var answer struct {
			OK    bool
			Error string
		}
		if jerr := json.Unmarshal(resp.Data, &answer); jerr != nil || !answer.OK {
			err = fmt.Errorf("node %s refused to serve the page: %s", node, answer.Error)
		}
	}
	if err != nil {
		p.unsubscribe()
		return nil, fmt.Errorf("failed to reach node %s: %w", node, err)
	}
	if c.s.opts.PingInterval > 0 {
		p.stopped.Add(1)
		go p.watch(c, node, c.s.opts.PingInterval)
	}
	return p, nil
}

// watch closes the page when the serving node stops answering: the page
// reconnects, and reaches the session wherever it runs next.
func (p *pipe) watch(c *conn, node string, every time.Duration) {
	defer p.stopped.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_, err := p.nc.RequestWithContext(ctx, p.id+".oping", nil)
		cancel()
		if err != nil {
			c.logger.Info("the node that serves this page stopped answering, closing", "node", node, "err", err)
			c.close(engine.CloseGoingAway, "the gateway node that runs the session stopped answering: reconnect")
			return
		}
	}
}

// send forwards one of the page's frames.
func (p *pipe) send(frame []byte) error { return p.nc.Publish(p.id+".in", frame) }

// close tells the serving node the page left, and stops.
func (p *pipe) close() {
	select {
	case <-p.stop:
		return
	default:
		close(p.stop)
	}
	m := nats.NewMsg(p.id + ".in")
	m.Header.Set(closeHeader, "1000 the page left")
	_ = p.nc.PublishMsg(m)
	p.unsubscribe()
	p.stopped.Wait()
}

func (p *pipe) unsubscribe() {
	for _, sub := range p.subs {
		_ = sub.Unsubscribe()
	}
}
