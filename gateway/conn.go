package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/lazylog"
	"github.com/coder/websocket"
	"golang.org/x/time/rate"
)

// conn is one browser connection: a page of one session. The goroutine
// the /ws handler starts (serve) owns it and reads. Everything the page
// receives comes from two queues, drained in order by one writer goroutine
// that runs only while there is something to write, or written at once by
// the goroutine that queued it while no writer is at work (writeNow): the
// page's stream (session.opened, the replay, the session's events and the
// deliveries addressed to this page, ordered by the session) and replies
// to frames the page sent.
type conn struct {
	s       *Server
	ws      socket
	cork    *corkConn // under ws; nil for a relayed page
	browser string
	logger  *slog.Logger
	// cookieless: the upgrade came with no identity cookie, from origin
	// (cookieless.go).
	cookieless bool
	origin     string
	// compressed: the socket negotiated permessage-deflate, so a frame may
	// take a deflate to write, which the page's writer does (writeNow).
	compressed bool

	// ctx ends when the connection starts closing. It stops waits between
	// frames; it is never the context of a Write or Ping, because the
	// library tears the socket down when one is cancelled mid-frame, and the
	// close code would be lost.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	closed    chan struct{} // closed when ws.Close has returned

	session *engine.Session // set by the reader at session.open
	page    *engine.Page    // set with session, under mu
	pipe    *pipe           // set by the reader when another node serves the page

	closeCode   engine.CloseCode // for the close queued after the replies
	closeReason string

	mu      sync.Mutex
	replies []engine.Event // error replies (and relayed frames), waiting for the writer; Frame nil: close after them
	// beforePage is how many of replies were queued before the page
	// attached: they go before its frames (session.opened first), the
	// others after them.
	beforePage int
	writing    bool          // a writer goroutine is running
	stopped    bool          // the handler is done: no writer starts
	room       chan struct{} // the writer took the replies: the reader may queue more
	writers    sync.WaitGroup
	stuck      *time.Timer // the running write's timeout
	// handling: the reader hands a frame to the session (and reads no
	// pong meanwhile: ping); endAfter: the session's stream ended
	// meanwhile, and the connection closes with it once that frame's
	// reply is queued (endWhenHandled).
	handling bool
	handed   int // frames handed to the session so far (ping)
	endAfter *closeRequest
	// Owned by the reader.
	throttle  *rate.Limiter // refused frames; nil until the first
	throttled bool
	// slowed counts the reader's pauses for refused frames (refuseMessage):
	// a pong it does not read then waits behind the page's own frames,
	// not on the session (ping).
	slowed atomic.Int64

	pingMu       sync.Mutex
	pingTimer    *time.Timer
	pingsStopped bool
	pinging      sync.WaitGroup // a ping waiting for its pong
}

// socket is what a conn needs of its page's connection: a WebSocket, or
// the relay from the node the page is connected to (relay.go).
type socket interface {
	Read(ctx context.Context) (websocket.MessageType, []byte, error)
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	Ping(ctx context.Context) error
	Close(code websocket.StatusCode, reason string) error
	CloseNow() error
}

// maxReplies is how many error replies may wait for the writer; a page
// that sends faster waits for them to be written (its frames are read more
// slowly), and never loses its connection over them.
const maxReplies = 64

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	// Before the cookie: a refused page must not get a browser identity.
	if err := s.originAllowed(r); err != nil {
		s.refuseOrigin(w, r, err)
		return
	}
	_, browser, ok := s.browserOrRefuse(w, r)
	if !ok {
		return
	}
	cw := &corkWriter{ResponseWriter: w, stuck: &s.stuckWriters}
	accept := &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns}
	if s.opts.CompressOver > 0 {
		accept.CompressionMode, accept.CompressionThreshold = websocket.CompressionNoContextTakeover, s.opts.CompressOver
	}
	ws, err := websocket.Accept(cw, r, accept)
	if err != nil {
		// Accept has answered: 403 for a wrong Origin, 400/426 otherwise.
		s.logRefusal(slog.LevelInfo, "websocket upgrade refused", "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	ws.SetReadLimit(s.opts.ReadLimit)
	if !s.admitSocket(browser) {
		s.opts.Metrics.LimitHit("sockets")
		s.logger.Warn("socket refused: the browser holds too many", "browser", browser, "max", s.opts.MaxSockets, "remote", r.RemoteAddr)
		_ = ws.Close(websocket.StatusCode(engine.CloseTooMany), fmt.Sprintf("this browser already has %d sockets open here, the most it may: close another page", s.opts.MaxSockets))
		return
	}
	c, ok := s.openConn(ws, cw.hijacked, browser, lazylog.With(s.logger, "remote", r.RemoteAddr))
	if !ok {
		s.socketClosed(browser)
		return
	}
	if token, _ := s.identityToken(r); token == "" && s.opts.Identify == nil {
		c.cookieless, c.origin = true, originOf(r) // before serve reads them
	}
	c.compressed = strings.HasPrefix(w.Header().Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	// The WebSocket is hijacked, so this handler may return: the page is
	// served on a goroutine of its own, whose reader then waits for the
	// page's next frame on a shallow stack, not under net/http's frames
	// (half the stack an idle page holds). Shutdown waits for it (track).
	go func() {
		defer s.socketClosed(browser)
		defer s.untrack(c)
		c.serve()
	}()
}

// serveSocket serves a page on sock, a WebSocket of this node or a page
// relayed from another, until it ends. cork is the WebSocket's connection
// (nil for a relayed page): the writer corks it around each batch.
func (s *Server) serveSocket(sock socket, cork *corkConn, browser string, logger *slog.Logger) {
	c, ok := s.openConn(sock, cork, browser, logger)
	if !ok {
		return
	}
	defer s.untrack(c)
	c.serve()
}

// openConn makes sock's conn and tracks it for Shutdown; false (sock
// closed with 1001) when the gateway is shutting down.
func (s *Server) openConn(sock socket, cork *corkConn, browser string, logger *slog.Logger) (*conn, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, ws: sock, cork: cork, browser: browser, logger: logger,
		ctx: ctx, cancel: cancel,
		closed: make(chan struct{}),
		room:   make(chan struct{}, 1),
	}
	if !s.track(c) {
		_ = sock.Close(websocket.StatusCode(engine.CloseGoingAway), "the gateway is shutting down")
		cancel()
		return nil, false
	}
	return c, true
}

// serve reads frames until the connection ends, then cleans up.
func (c *conn) serve() {
	if c.s.opts.PingInterval > 0 {
		c.armPing()
	}
	defer func() {
		if c.page != nil {
			c.page.Detach()
			c.logger.Info("browser disconnected", "session", c.session.ID(), "page", c.page.ID())
		}
		c.close(engine.CloseNormal, "")
		if c.pipe != nil {
			c.pipe.close() // after close: a move in progress sees the end
			c.logger.Info("relayed page disconnected")
		}
		c.stopPings()
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		c.writers.Wait()
		<-c.closed
	}()
	for {
		typ, data, buf, err := c.read()
		if err != nil {
			switch {
			case errors.Is(err, websocket.ErrMessageTooBig):
				// The library closed the socket with 1009.
				c.s.opts.Metrics.LimitHit("read_limit")
				c.sessionLogger().Info("frame over the read limit, connection closed", "limit", c.s.opts.ReadLimit)
			case websocket.CloseStatus(err) == -1:
				c.logger.Debug("read ended", "err", err)
			}
			return
		}
		switch {
		case typ != websocket.MessageText:
			c.s.opts.Metrics.FrameIn("invalid")
			c.refuse(engine.WireBadFrame, ErrBadFrame.Error()+": binary frames are not accepted: send JSON text frames")
		case c.pipe != nil:
			// Another node serves this page: its frames go there as they
			// are. The pipe may keep a frame a while: it gets a copy.
			if err := c.pipe.send(bytes.Clone(data)); err != nil {
				c.close(engine.CloseGoingAway, "the relay to the session's node failed: reconnect")
			}
		default:
			c.mu.Lock()
			c.handling = true
			c.mu.Unlock()
			c.handle(data)
			c.endWhenHandled()
		}
		releaseReadBuf(buf)
	}
}

// read reads the next frame. From a WebSocket, it reads into a buffer of
// readBufs, returned as buf, which the caller gives back with
// releaseReadBuf once done with data: a busy page reuses a few buffers
// instead of allocating each frame, and an idle one holds none. handle
// keeps nothing of data (decoding copies what it keeps).
func (c *conn) read() (websocket.MessageType, []byte, *bytes.Buffer, error) {
	// The read context is not c.ctx: cancelling a Read makes the library
	// close the socket itself, before our close code is sent.
	ws, ok := c.ws.(*websocket.Conn)
	if !ok {
		typ, data, err := c.ws.Read(context.Background())
		return typ, data, nil, err
	}
	typ, r, err := ws.Reader(context.Background())
	if err != nil {
		return 0, nil, nil, err
	}
	buf := readBufs.Get().(*bytes.Buffer)
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		releaseReadBuf(buf)
		return 0, nil, nil, err
	}
	return typ, buf.Bytes(), buf, nil
}

// readBufs are the frame buffers of pages that are reading.
var readBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledRead is the largest read buffer given back to readBufs.
const maxPooledRead = 64 << 10

func releaseReadBuf(buf *bytes.Buffer) {
	if buf != nil && buf.Cap() <= maxPooledRead {
		readBufs.Put(buf)
	}
}

// handle takes one frame. It never panics on input: a problem becomes an
// error reply, and the connection and session stay up.
func (c *conn) handle(data []byte) {
	defer func() {
		if p := recover(); p != nil {
			c.logger.Error("frame handler panicked", "panic", p, "stack", string(debug.Stack()))
			c.refuse(engine.WireInternal, "the gateway failed on this frame")
		}
	}()
	f, err := DecodeFrame(data)
	if typ := frameType(f); typ != FrameSessionOpen || !c.relayed() {
		// A relayed page's session.open was counted by the node its
		// socket is on, which sends it again at each move.
		c.s.opts.Metrics.FrameIn(typ)
	}
	if err != nil {
		code := engine.WireBadFrame
		if errors.Is(err, ErrUnknownFrame) {
			code = engine.WireUnknownFrame
		}
		c.refuseMessage(refusedMessageID(data), code, err.Error())
		return
	}
	if open, ok := f.(SessionOpen); ok {
		c.open(open)
		return
	}
	var messageID string // a message's id, which its refusal names
	if m, ok := f.(MessageFrame); ok {
		messageID = m.ID
	}
	if c.page == nil {
		c.refuseMessage(messageID, engine.WireNotOpen, "send session.open first")
		return
	}
	// c.ctx bounds the wait for the session's inbox: it ends with the
	// connection.
	ctx := c.ctx
	switch f := f.(type) {
	case MessageFrame:
		if f.ID == "" {
			err = c.page.Send(ctx, f.Content)
		} else {
			err = c.page.SendOnce(ctx, f.ID, f.Content)
		}
	case engine.ToolResult:
		err = c.page.Answer(ctx, f)
	case engine.ToolError:
		err = c.page.Answer(ctx, f)
	case engine.ToolProgress:
		err = c.page.Progress(ctx, f)
	case engine.ToolApprove:
		err = c.page.Approve(ctx, f)
	case CancelFrame:
		err = c.page.Cancel(ctx)
	case PingFrame:
		// Answered here, on the node that runs the session: a relayed
		// page's pong has come the whole way.
		c.reply(FramePong, pongFrame)
	default:
		// DecodeFrame made a frame this switch has no case for: every
		// frame taken gets a reply, this one internal.
		err = fmt.Errorf("the gateway decoded a %T frame it does not handle", f)
		c.logger.Error("frame not handled", "err", err)
	}
	if errors.Is(err, engine.ErrUnloaded) {
		// Another node runs the session now: the close that follows (4001)
		// has the page reconnect there and send again what was not stored.
		c.logger.Info("frame not taken: the session moved to another node", "session", c.session.ID(), "err", err)
		return
	}
	if err != nil {
		code := errorCode(err)
		if code == engine.WireStaleAttempt || code == engine.WireSettled {
			c.logger.Debug("ignored late tool answer", "session", c.session.ID(), "err", err)
		}
		c.refuseMessage(messageID, code, wireText(err, ""))
	}
}

// pongFrame is the pong frame, the same for every ping.
var pongFrame = []byte(`{"type":"pong"}`)

// wireText is err's text in an error frame answering a frame (of type
// frame, when the text is to name it). The engine's bad request is a bad
// frame on this wire, and is said as one: "bad frame: " and what was
// wrong.
func wireText(err error, frame string) string {
	if frame != "" {
		frame += ": "
	}
	if errors.Is(err, engine.ErrBadRequest) {
		return ErrBadFrame.Error() + ": " + frame + badRequestWhat(err)
	}
	return frame + engine.PublicText(err)
}

// badRequestWhat is what an engine's bad request says was wrong, without
// its kind's name.
func badRequestWhat(err error) string {
	if bad, ok := errors.AsType[*engine.RequestError](err); ok {
		return bad.What
	}
	return err.Error()
}

// errorCode maps engine errors to error frame codes.
func errorCode(err error) engine.WireCode {
	switch {
	case errors.Is(err, engine.ErrUnknownCall):
		return engine.WireUnknownCall
	case errors.Is(err, engine.ErrStaleAttempt):
		return engine.WireStaleAttempt
	case errors.Is(err, engine.ErrSettled):
		return engine.WireSettled
	case errors.Is(err, engine.ErrSessionClosed):
		return engine.WireSessionClosed
	case errors.Is(err, engine.ErrLimitExceeded):
		return engine.WireLimitExceeded
	case errors.Is(err, engine.ErrBadRequest):
		return engine.WireBadFrame
	case errors.Is(err, errUnknownSession):
		return engine.WireUnknownSession
	case errors.Is(err, engine.ErrStoreUnavailable):
		return engine.WireStoreFailed
	case errors.Is(err, errUnreadable):
		return engine.WireUnreadable
	case errors.Is(err, engine.ErrBadConfig):
		return engine.WireBadConfig
	case errors.Is(err, engine.ErrWorker):
		return engine.WireWorkerFailed
	default:
		return engine.WireInternal
	}
}

// open opens or resumes the connection's session and attaches this page:
// its stream starts with session.opened and the replay.
func (c *conn) open(f SessionOpen) {
	if c.page != nil {
		c.refuse(engine.WireAlreadyOpen, fmt.Sprintf("this connection already has session %s", c.session.ID()))
		return
	}
	eng := c.s.opts.Engine
	if err := eng.CheckTools(f.Tools); err != nil {
		c.refuse(errorCode(err), wireText(err, "session.open"))
		return
	}
	if s, loaded := eng.Session(f.Session); !loaded || f.After < s.KeptFrom()-1 {
		// A new session is stored, one out of memory read, and so is a
		// replay from before the events a session keeps in memory: with
		// the store down each would hold this socket's reader (its pings
		// unanswered) until the store's timeouts. The page tries again.
		if err := eng.StoreHealth(); err != nil {
			c.refuse(engine.WireStoreFailed, fmt.Sprintf("session.open: %v: try again once it is back", err))
			return
		}
	}
	var sess *engine.Session
	if f.Session == "" {
		refund, ok, wait := c.s.allowNewSession(c.browser)
		if !ok {
			c.refuse(engine.WireRateLimited, fmt.Sprintf("this browser opened %d sessions in the last minute, the most it may: try again in %v", c.s.opts.NewSessionsPerMinute, wait.Round(time.Second)+time.Second))
			return
		}
		ctx, cancel := opContext(c.ctx)
		var err error
		sess, err = eng.Open(ctx, engine.OpenOptions{Owner: c.browser})
		cancel()
		if err != nil {
			refund()
			c.refuse(errorCode(err), wireText(err, ""))
			return
		}
	}
	var page *engine.Page
	var err error
	// A session may unload between Load and Attach: load it again.
	for range 3 {
		if f.Session != "" {
			if sess, err = c.resume(f.Session); errors.Is(err, engine.ErrOwnedElsewhere) {
				c.elsewhere(f, err)
				return
			}
			if err != nil {
				c.refuse(errorCode(err), wireText(err, ""))
				return
			}
		}
		page, err = sess.Attach(c.ctx, engine.AttachOptions{After: f.After, Epoch: f.Epoch, Tools: f.Tools, Buffer: c.s.opts.SendQueue, Wake: c.kick, WriteNow: c.writeNow, FrameBytes: c.s.opts.ReadLimit})
		if !errors.Is(err, engine.ErrUnloaded) {
			break
		}
		// A new session unloads too, idle with no page for --unload: one
		// opened just now did before this page attached (a stalled
		// process, a tiny --unload). It is loaded again as any other.
		f.Session = sess.ID()
	}
	if errors.Is(err, engine.ErrUnloaded) && f.Session != "" {
		// It left memory at each try: another node took it (its lease
		// was lost here), or it unloads as fast as it loads. Either way
		// the page resumes by reconnecting, as after any move.
		c.close(engine.CloseElsewhere, leftThisNode)
		return
	}
	if err != nil {
		code := errorCode(err)
		if f.Session == "" {
			// The session was only for this page: it goes before the reply.
			ctx, cancel := opContext(c.ctx)
			sess.End(ctx, "its page could not attach")
			cancel()
		}
		c.refuse(code, wireText(err, "session.open"))
		return
	}
	c.mu.Lock()
	c.session, c.page = sess, page
	c.beforePage = len(c.replies)
	c.mu.Unlock()
	c.kick()
	c.logger.Info("browser connected", "session", sess.ID(), "page", page.ID(), "new", f.Session == "", "after", f.After, "tools", len(f.Tools))
}

// sessionLogger is the connection's logger, with its session and page once
// open: connection lines carry them from then on.
func (c *conn) sessionLogger() *slog.Logger {
	c.mu.Lock()
	sess, page := c.session, c.page
	c.mu.Unlock()
	if sess == nil || page == nil {
		return c.logger
	}
	return c.logger.With("session", sess.ID(), "page", page.ID())
}

// opContext bounds a session's open or load for a page to a minute. It
// keeps ctx's values, not its cancellation: a context derived from the
// page's would leave the page's context, for as long as the page stays
// open, a table of children that is empty once the open is done (400
// bytes a page). The page's reader runs the open, so a page that leaves
// meanwhile is noticed after it either way.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// resume finds the browser's session id, loading it when it is not in
// memory. Another browser's session, one that ended, and one the store does
// not have are all unknown_session: a page cannot learn which.
func (c *conn) resume(id string) (*engine.Session, error) {
	ctx, cancel := opContext(c.ctx)
	defer cancel()
	sess, err := c.s.opts.Engine.LoadFor(ctx, id, c.browser)
	switch {
	case err == nil:
		return sess, nil
	case errors.Is(err, engine.ErrOwnedElsewhere), errors.Is(err, engine.ErrLimitExceeded):
		return nil, err
	case errors.Is(err, engine.ErrNoSession), errors.Is(err, engine.ErrSessionClosed):
		return nil, fmt.Errorf("%w: there is no session %.64q for this browser (it ended, it is another browser's, or the store does not have it: deleted after --retain, or lost when a gateway on --store memory restarted): open a new one%s", errUnknownSession, id, c.cookielessResume())
	case errors.Is(err, engine.ErrCorrupt):
		// Asking again reads it again, and finds it as damaged: the
		// operator hears of it once an hour, not at every page's try.
		if c.s.firstUnreadable(id) {
			c.logger.Error("a session's journal cannot be read: its pages start new sessions until it is repaired (docs/storage.md)", "session", id, "err", err)
		} else {
			c.logger.Debug("a session's journal cannot be read", "session", id, "err", err)
		}
		return nil, fmt.Errorf("%w: session %q cannot be opened: %w", errUnreadable, id, err)
	default:
		logLoadFailure(c.logger, id, err)
		return nil, fmt.Errorf("failed to load session %q: %w", id, err)
	}
}

// elsewhere hands the page to the node that runs its session, through the
// relay; without one, or when that node does not answer, the page is closed
// with 4001 and reconnects (a load balancer may reach the node, and a dead
// node's sessions are free once their leases expire).
func (c *conn) elsewhere(f SessionOpen, err error) {
	var owned *engine.OwnedElsewhereError
	if relay := c.s.opts.Relay; relay != nil && errors.As(err, &owned) {
		p, derr := relay.pipeTo(c, owned.Node, f)
		if derr == nil {
			c.pipe = p
			c.logger.Info("page relayed to the node that runs its session", "session", f.Session, "node", owned.Node)
			return
		}
		c.logger.Info("failed to relay the page", "session", f.Session, "node", owned.Node, "err", derr)
	}
	c.logger.Info("session runs on another node: the page reconnects", "session", f.Session, "err", err)
	c.close(engine.CloseElsewhere, "the session runs on another gateway node: reconnect")
}

// errUnknownSession: session.open names a session this browser cannot open.
var errUnknownSession = errors.New("unknown session")

// errUnreadable: session.open names one of this browser's sessions whose
// journal cannot be read back (session_unreadable). A replay that a loaded
// session's store failed to read is not that: the session runs, and the
// page may try again (internal).
var errUnreadable = errors.New("unreadable session")

// refuse replies to a frame the gateway could not take. It never closes the
// connection: when replies pile up it waits for the writer, and a page that
// keeps sending refused frames past the burst is read more slowly, at
// RefusedRate frames a second, and told so once (rate_limited).
func (c *conn) refuse(code engine.WireCode, message string) {
	c.refuseMessage("", code, message)
}

// maxErrorText bounds an error frame's message. Replies wait for the
// writer in a queue of 64 frames, and a page that reads nothing would
// otherwise have that queue hold 64 texts that each repeat a refused value
// of up to a frame's size.
const maxErrorText = 1024

// maxQuoted is the most of a refused value (a frame's type, a Host, an
// Origin) an answer quotes (docs/protocol.md, docs/gateway.md).
const maxQuoted = 64

// refuseMessage is refuse for the message of id (none: "").
func (c *conn) refuseMessage(id string, code engine.WireCode, message string) {
	message = clip.Marked(message, maxErrorText, "...")
	c.reply(FrameError, encodeFrame(FrameError, engine.ErrorEvent{Code: code, Message: message, ID: id}))
	if code == engine.WireLimitExceeded || code == engine.WireRateLimited {
		c.s.opts.Metrics.LimitHit(string(code))
	}
	if c.throttle == nil {
		c.throttle = rate.NewLimiter(rate.Limit(c.s.opts.RefusedRate), c.s.opts.RefusedBurst)
	}
	now := c.s.opts.Clock.Now()
	if c.throttled && c.throttle.TokensAt(now) >= float64(c.s.opts.RefusedBurst) {
		// The page stopped long enough for the whole burst to come back:
		// the episode is over. A page that merely slowed for a moment is
		// not told again.
		c.throttled = false
	}
	if c.throttle.AllowN(now, 1) {
		return
	}
	if !c.throttled {
		c.throttled = true
		c.s.opts.Metrics.LimitHit("refused_frames")
		c.sessionLogger().Warn("browser sends too many refused frames, slowing down", "rate", c.s.opts.RefusedRate, "burst", c.s.opts.RefusedBurst)
		c.reply(FrameError, encodeFrame(FrameError, engine.ErrorEvent{Code: engine.WireRateLimited, Message: fmt.Sprintf(
			"too many refused frames: the gateway reads this connection's frames at %g a second until they stop", c.s.opts.RefusedRate)}))
	}
	// Reading pauses until the next token: the page is slowed, not cut off.
	r := c.throttle.ReserveN(now, 1)
	c.slowed.Add(1)
	if clock.Sleep(c.ctx, c.s.opts.Clock, r.DelayFrom(now)) != nil {
		r.CancelAt(c.s.opts.Clock.Now())
	}
	c.slowed.Add(1)
}

// closeAfterReplies closes the connection with code once the frames queued
// before it are written: how a relayed page ends, and a page whose session
// ended while a frame of its was handed over (endWhenHandled).
func (c *conn) closeAfterReplies(code engine.CloseCode, reason string) {
	c.mu.Lock()
	c.closeCode, c.closeReason = code, reason
	c.replies = append(c.replies, engine.Event{})
	c.mu.Unlock()
	c.kick()
}

// close ends the connection once, with code; later calls do nothing.
func (c *conn) close(code engine.CloseCode, reason string) {
	c.closeOnce.Do(func() {
		// Stop the waits and refuse new frames. A write in progress
		// finishes first; then Close sends the close frame after it.
		c.cancel()
		go func() {
			// Close waits up to 5s to write the close frame and 5s for
			// the peer's, which serve's Read takes; then it closes the
			// socket anyway.
			_ = c.ws.Close(websocket.StatusCode(code), reason)
			close(c.closed)
		}()
	})
}
