package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/coder/websocket"
)

const (
	statusNormal          = websocket.StatusNormalClosure
	statusGoingAway       = websocket.StatusGoingAway
	statusPolicyViolation = websocket.StatusPolicyViolation
)

// conn is one browser connection. The /ws handler's goroutine owns it and
// reads; writeLoop is the only writer; pump feeds it the session's events
// and the router's deliveries, each delivery after the events published
// before it.
type conn struct {
	s       *Server
	ws      *websocket.Conn
	browser string
	logger  *slog.Logger
	// out feeds the writer. deliveries holds the router's frames until
	// pump has queued every session event published before them.
	out        chan json.RawMessage
	deliveries chan delivery

	// ctx ends when the connection starts closing. It stops the loops
	// between frames; it is never the context of a Write or Ping, because
	// the library tears the socket down when one is cancelled mid-frame,
	// and the close code would be lost.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	closed    chan struct{} // closed when ws.Close has returned
	wg        sync.WaitGroup

	session *engine.Session
	sub     *engine.Subscription

	pingMu       sync.Mutex
	pingTimer    *time.Timer
	pingsStopped bool
	pinging      sync.WaitGroup // a ping waiting for its pong

	// Set by flushAndClose before its marker is queued.
	flushCode   websocket.StatusCode
	flushReason string
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	browser, err := s.browserFor(w, r)
	if err != nil {
		s.logger.Error("failed to identify browser", "err", err)
		http.Error(w, "could not load the cookie session", http.StatusInternalServerError)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns})
	if err != nil {
		// Accept has answered: 403 for a wrong Origin, 400/426 otherwise.
		s.logger.Info("websocket upgrade refused", "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	ws.SetReadLimit(s.opts.ReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, ws: ws, browser: browser,
		logger: s.logger.With("remote", r.RemoteAddr),
		// The session's events wait in the subscription (SendQueue of
		// them); out only smooths the hand-off to the writer, and
		// deliveries are a few per turn. Small buffers keep an idle
		// connection cheap.
		out:        make(chan json.RawMessage, min(s.opts.SendQueue, 16)),
		deliveries: make(chan delivery, min(s.opts.SendQueue, 64)),
		ctx:        ctx, cancel: cancel,
		closed: make(chan struct{}),
	}
	if !s.track(c) {
		ws.Close(statusGoingAway, "the gateway is shutting down")
		cancel()
		return
	}
	defer s.untrack(c)
	c.serve()
}

// serve reads frames until the connection ends, then cleans up.
func (c *conn) serve() {
	c.wg.Add(1)
	go c.writeLoop()
	if c.s.opts.PingInterval > 0 {
		c.armPing()
	}
	defer func() {
		if c.session != nil {
			c.s.opts.Router.Detach(c.session.ID(), c)
			c.s.detached(c.session.ID())
			c.sub.Close()
			c.logger.Info("browser disconnected", "session", c.session.ID())
		}
		c.close(statusNormal, "")
		c.stopPings()
		c.wg.Wait()
		<-c.closed
	}()
	for {
		// The read context is not c.ctx: cancelling a Read makes the
		// library close the socket itself, before our close code is sent.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			if code := websocket.CloseStatus(err); code == -1 {
				c.logger.Debug("read ended", "err", err)
			}
			return
		}
		if typ != websocket.MessageText {
			c.sendError("bad_frame", "binary frames are not accepted: send JSON text frames")
			continue
		}
		c.handle(data)
	}
}

// handle takes one frame. It never panics on input: a problem becomes an
// error frame, and the connection and session stay up.
func (c *conn) handle(data []byte) {
	defer func() {
		if p := recover(); p != nil {
			c.logger.Error("frame handler panicked", "panic", p)
			c.sendError("internal", "the gateway failed on this frame")
		}
	}()
	f, err := DecodeFrame(data)
	if err != nil {
		code := "bad_frame"
		if errors.Is(err, ErrUnknownFrame) {
			code = "unknown_frame"
		}
		c.sendError(code, err.Error())
		return
	}
	if open, ok := f.(SessionOpen); ok {
		c.open(open)
		return
	}
	if c.session == nil {
		c.sendError("not_open", "send session.open first")
		return
	}
	// c.ctx bounds the wait for the session's inbox: it ends with the
	// connection.
	ctx := c.ctx
	switch f := f.(type) {
	case MessageFrame:
		err = c.session.Send(ctx, f.Content)
	case engine.ToolResult:
		err = c.session.Answer(ctx, f)
	case engine.ToolError:
		err = c.session.Answer(ctx, f)
	case CancelFrame:
		err = c.session.Cancel(ctx)
	}
	if err != nil {
		code := errorCode(err)
		if code == "stale_attempt" || code == "settled" {
			c.logger.Debug("ignored late tool answer", "session", c.session.ID(), "err", err)
		}
		c.sendError(code, err.Error())
	}
}

// errorCode maps engine errors to error frame codes.
func errorCode(err error) string {
	switch {
	case errors.Is(err, engine.ErrUnknownCall):
		return "unknown_call"
	case errors.Is(err, engine.ErrStaleAttempt):
		return "stale_attempt"
	case errors.Is(err, engine.ErrSettled):
		return "settled"
	case errors.Is(err, engine.ErrSessionClosed):
		return "session_closed"
	case errors.Is(err, engine.ErrBadConfig):
		return "bad_config"
	case errors.Is(err, engine.ErrWorker):
		return "worker_failed"
	default:
		return "internal"
	}
}

// open opens or resumes the connection's session, lets the router use this
// page, replays what the page missed, then starts live delivery.
func (c *conn) open(f SessionOpen) {
	if c.session != nil {
		c.sendError("already_open", fmt.Sprintf("this connection already has session %s", c.session.ID()))
		return
	}
	var sess *engine.Session
	eng := c.s.opts.Engine
	if f.Session == "" {
		ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		var err error
		sess, err = eng.Open(ctx)
		cancel()
		if err != nil {
			c.sendError(errorCode(err), err.Error())
			return
		}
		c.s.adopt(sess, c.browser)
	} else {
		var ok bool
		sess, ok = eng.Session(f.Session)
		if !ok || c.s.owner(f.Session) != c.browser {
			c.sendError("unknown_session", fmt.Sprintf("there is no session %q for this browser (it ended, or the gateway restarted): open a new one", f.Session))
			return
		}
	}
	replay, sub, err := sess.Subscribe(f.After, c.s.opts.SendQueue)
	if err != nil {
		c.sendError("bad_frame", fmt.Sprintf("session.open: %v", err))
		return
	}
	c.session, c.sub = sess, sub
	// Attach now, so a page that has session.opened runs the calls that
	// follow. Deliveries wait in c.deliveries until pump, which starts
	// after the replay, puts them in their place among the events.
	c.s.opts.Router.Attach(sess.ID(), c, f.Tools)
	c.s.attached(sess.ID())
	last := f.After
	if n := len(replay); n > 0 {
		last = replay[n-1].Seq
	}
	if !c.forward(encodeFrame(FrameSessionOpened, SessionOpened{Session: sess.ID(), Seq: last})) {
		return
	}
	for _, ev := range replay {
		if !c.forward(ev.Frame) {
			return
		}
	}
	c.wg.Add(1)
	go c.pump()
	if f.Session == "" {
		c.logger.Info("session started by browser", "session", sess.ID(), "tools", f.Tools)
	} else {
		c.logger.Info("session resumed", "session", sess.ID(), "after", f.After, "replayed", len(replay), "tools", f.Tools)
	}
}

// pump forwards live session events and the router's deliveries to the
// writer, in order.
func (c *conn) pump() {
	defer c.wg.Done()
	for {
		select {
		case ev := <-c.sub.C():
			if !c.forward(ev.Frame) {
				return
			}
		case d := <-c.deliveries:
			if !c.deliver(d) {
				return
			}
		case <-c.sub.Done():
			switch err := c.sub.Err(); {
			case errors.Is(err, engine.ErrSlowSubscriber):
				c.tooSlow("the session's events")
			case errors.Is(err, engine.ErrSessionClosed):
				for len(c.sub.C()) > 0 {
					if !c.forward((<-c.sub.C()).Frame) {
						return
					}
				}
				c.flushAndClose(statusNormal, "the session ended")
			}
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// delivery is a frame from the router, queued when the session's latest
// event was after.
type delivery struct {
	frame json.RawMessage
	after int64
}

// deliver writes d in its place among the session's events: after every
// event up to d.after, which are all in the subscription by now, and
// before any later one. So a page sees a call's tool.started before its
// tool.call, and has seen every event before a call when it resumes.
func (c *conn) deliver(d delivery) bool {
	for len(c.sub.C()) > 0 {
		ev := <-c.sub.C()
		if ev.Seq > d.after {
			return c.forward(d.frame) && c.forward(ev.Frame)
		}
		if !c.forward(ev.Frame) {
			return false
		}
	}
	return c.forward(d.frame)
}

// forward queues a frame for the writer, waiting for room. It reports
// false once the connection is closing, or when the session dropped this
// connection's subscription because it fell behind: waiting would not
// help then, so the connection is closed and the page resumes.
func (c *conn) forward(frame json.RawMessage) bool {
	select {
	case c.out <- frame:
		return true
	case <-c.ctx.Done():
		return false
	case <-c.sub.Done():
		if errors.Is(c.sub.Err(), engine.ErrSlowSubscriber) {
			c.tooSlow("the session's events")
			return false
		}
		// The session ended: what it published before still goes out.
		select {
		case c.out <- frame:
			return true
		case <-c.ctx.Done():
			return false
		}
	}
}

const reasonTooSlow = "the connection could not keep up: reconnect and resume"

// tooSlow closes a connection whose queue overflowed. Nothing is lost but
// the socket: the page resumes from the last seq it saw.
func (c *conn) tooSlow(what string) {
	c.logger.Warn("browser too slow, closing", "session", c.session.ID(), "overflowed", what, "queue", cap(c.out))
	c.close(statusPolicyViolation, reasonTooSlow)
}

// Send queues a delivery from the router without blocking; a full queue
// means the browser cannot keep up, so the connection is closed.
func (c *conn) Send(frame json.RawMessage) bool {
	if c.ctx.Err() != nil {
		return false
	}
	select {
	case c.deliveries <- delivery{frame: frame, after: c.session.LastSeq()}:
		return true
	default:
		c.tooSlow("tool deliveries")
		return false
	}
}

// sendError queues an error frame for the writer without blocking.
func (c *conn) sendError(code, message string) {
	if c.ctx.Err() != nil {
		return
	}
	select {
	case c.out <- encodeFrame(FrameError, ErrorFrame{Code: code, Message: message}):
	default:
		c.logger.Warn("send queue full, closing", "queue", cap(c.out))
		c.close(statusPolicyViolation, reasonTooSlow)
	}
}

func (c *conn) writeLoop() {
	defer c.wg.Done()
	// One timer for every write, not a context per frame: a peer that stops
	// reading blocks a write until WriteTimeout, then loses its socket.
	stuck := time.AfterFunc(time.Hour, func() {
		c.logger.Warn("write timed out, dropping the connection", "timeout", c.s.opts.WriteTimeout)
		_ = c.ws.CloseNow()
	})
	stuck.Stop()
	defer stuck.Stop()
	for {
		select {
		case frame := <-c.out:
			if c.ctx.Err() != nil {
				return // closing: the close frame is next
			}
			if frame == nil { // flushAndClose's marker: everything before it is written
				c.close(c.flushCode, c.flushReason)
				return
			}
			// Not c.ctx: see conn.ctx.
			stuck.Reset(c.s.opts.WriteTimeout)
			err := c.ws.Write(context.Background(), websocket.MessageText, frame)
			stuck.Stop()
			if err != nil {
				c.close(statusGoingAway, "write failed")
				return
			}
		case <-c.ctx.Done():
			return
		}
	}
}

// armPing schedules the next keepalive ping. A timer, not a goroutine per
// connection: an idle connection should cost as little as possible.
func (c *conn) armPing() {
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if !c.pingsStopped {
		c.pingTimer = time.AfterFunc(c.s.opts.PingInterval, c.ping)
	}
}

// ping runs in the timer's goroutine: it waits for the pong, closes a peer
// that does not answer in time, and schedules the next ping.
func (c *conn) ping() {
	c.pingMu.Lock()
	if c.pingsStopped {
		c.pingMu.Unlock()
		return
	}
	c.pinging.Add(1)
	c.pingMu.Unlock()
	defer c.pinging.Done()
	// Not c.ctx: see conn.ctx. Once the socket closes, Ping returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), c.s.opts.PingInterval)
	err := c.ws.Ping(ctx)
	cancel()
	if c.ctx.Err() != nil {
		return
	}
	if err != nil {
		c.logger.Info("browser stopped answering pings, closing", "err", err)
		c.close(statusGoingAway, "ping timeout")
		return
	}
	c.armPing()
}

// stopPings cancels the next ping and waits for one in flight.
func (c *conn) stopPings() {
	c.pingMu.Lock()
	c.pingsStopped = true
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	c.pingMu.Unlock()
	c.pinging.Wait()
}

// close ends the connection once, with code; later calls do nothing.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		// Stop the loops and refuse new frames. A write in progress
		// finishes first; then Close sends the close frame after it.
		c.cancel()
		go func() {
			// Close waits up to 5s to write the close frame and 5s for
			// the peer's, which serve's Read takes; then it closes the
			// socket anyway.
			_ = c.ws.Close(code, reason)
			close(c.closed)
		}()
	})
}

// flushAndClose closes the connection once every frame queued before it has
// been written, so a page sees session.ended before the close.
func (c *conn) flushAndClose(code websocket.StatusCode, reason string) {
	c.flushCode, c.flushReason = code, reason
	select {
	case c.out <- nil:
	case <-c.ctx.Done():
		c.close(code, reason)
	}
}
