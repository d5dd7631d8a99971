package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/agui"
	"github.com/clienttools/gateway/gateway/aisdk"
	"github.com/clienttools/gateway/gateway/frontend"
)

// The HTTP front ends (docs/integrations.md): the AI SDK's UI message stream
// and AG-UI. Each speaks HTTP with server-sent events and keys its
// conversations by an id the browser mints (the AI SDK's chat id, AG-UI's
// threadId); the gateway turns that key into a session of the cookie's
// browser, under the same rules as /ws: the Origin check, the cookie
// identity, a browser's own sessions only, the new-session rate, the socket
// count (an open stream counts as a socket) and a bound on the request.

// Routes of the HTTP front ends.
const (
	RouteAISDK       = "/api/chat"
	RouteAISDKResume = "/api/chat/{id}/stream"
	RouteAGUI        = "/ag-ui"
	// The Stop buttons' routes: the chat's model turn and its open calls
	// stop, as /ws's cancel stops them. An aborted request cannot say it:
	// a reload aborts it too, and the chat resumes.
	RouteAISDKCancel = "/api/chat/{id}/cancel"
	RouteAGUICancel  = "/ag-ui/{id}/cancel"
)

// DefaultChatBodyLimit is Options.ChatBodyLimit's default: the AI SDK posts
// the whole conversation on every request, so its bound is larger than a
// frame's.
const DefaultChatBodyLimit = 8 << 20

// DefaultChatBodyTimeout is Options.ChatBodyTimeout's default: with the
// second per 16 KiB that readBody adds, time for a slow mobile link.
const DefaultChatBodyTimeout = time.Minute

// browserCtxKey carries the browser's id from identify or chatRoute to
// the handler (browserOf).
type browserCtxKey struct{}

// chatRoute admits a request of an HTTP front end: the Origin check before
// any cookie, the browser's cookie identity (made when it has none), the
// socket count, a bound on the body, and a context that ends when the
// gateway shuts down.
func (s *Server) chatRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		browser, ok := s.admitBrowser(w, r, "chat request refused", "GET, POST")
		if !ok {
			return
		}
		if !s.admitSocket(browser) {
			s.opts.Metrics.LimitHit("sockets")
			frontend.Text(w, fmt.Sprintf("this browser already has %d streams and sockets open here, the most it may: close another page", s.opts.MaxSockets), http.StatusTooManyRequests)
			return
		}
		defer s.socketClosed(browser)
		ctx, stop, ok := s.trackStream(r.Context())
		if !ok {
			frontend.Text(w, "the gateway is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer stop()
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.ChatBodyLimit)
		if limit, err := s.readBody(ctx, w, r); err != nil {
			status, err := frontend.Status(err)
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			switch {
			case closing:
				status, err = http.StatusServiceUnavailable, errors.New("the gateway is shutting down")
			case errors.Is(err, os.ErrDeadlineExceeded):
				status, err = http.StatusRequestTimeout, fmt.Errorf("the request body did not arrive within %v", limit.Round(time.Millisecond))
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.Canceled):
				status, err = http.StatusBadRequest, errors.New("the request body ended before its length")
			}
			s.logRefusal(slog.LevelInfo, "chat request refused", "path", r.URL.Path, "status", status, "err", err)
			frontend.Text(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, browserCtxKey{}, browser)))
	})
}

// admitBrowser admits a request of a browser's about its chats: the
// Origin check before any cookie (refused: what the log line says), a
// preflight answered with methods, and the browser's cookie identity
// (made when it has none). It reports false when it has answered.
func (s *Server) admitBrowser(w http.ResponseWriter, r *http.Request, refused, methods string) (string, bool) {
	if !s.admitOrigin(w, r, refused) {
		return "", false
	}
	if r.Method == http.MethodOptions {
		s.preflight(w, r, methods)
		return "", false
	}
	_, browser, ok := s.browserOrRefuse(w, r)
	if ok {
		// Every answer is this browser's chat, or says something of it
		// (a 204: no stream to resume): no shared cache may keep one for
		// the next browser that asks for the same URL.
		w.Header().Set("Cache-Control", "no-store")
	}
	return browser, ok
}

// readBody reads a front end's request body whole, within
// ChatBodyTimeout and a second more for each minBodyRate bytes it may
// hold (its Content-Length, else ChatBodyLimit): a client that sends it
// slowly, or never ends it, holds the connection (and its file descriptor)
// no longer, and a long chat posted over a slow link still gets through.
// The deadline is lifted once the body is in, so the response streams as
// long as it must; it is brought forward when ctx ends (the gateway shuts
// down), so a body on its way does not hold the shutdown. It returns the
// time the body had.
func (s *Server) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request) (time.Duration, error) {
	size := s.opts.ChatBodyLimit
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength
	}
	limit := s.opts.ChatBodyTimeout + time.Duration(size)*time.Second/minBodyRate
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(limit)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return limit, err
	}
	stop := context.AfterFunc(ctx, func() { _ = rc.SetReadDeadline(time.Now()) })
	body, err := io.ReadAll(r.Body)
	if !stop() || err != nil {
		// The deadline stays: the server drains what is left of a body
		// before it answers, and this one may never come. The answer
		// closes the connection.
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		if err == nil {
			err = ctx.Err()
		}
		return limit, err
	}
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return limit, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return limit, nil
}

// minBodyRate is the slowest a front end's body may come, in bytes a
// second, past ChatBodyTimeout: 8 MiB, the most a body may be, in about 9
// minutes.
const minBodyRate = 16 << 10

// preflight answers a CORS preflight of an allowed origin: the methods and
// the headers the front ends' clients send (JSON bodies, and whatever
// headers the app adds to its transport).
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, methods string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", methods)
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// trackStream registers a front end's request, so that Shutdown ends it
// (http.Server.Shutdown waits for a stream that may last minutes); false
// once shutting down.
func (s *Server) trackStream(parent context.Context) (context.Context, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(parent)
	if s.streams == nil {
		s.streams = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	s.streams[key] = struct{}{}
	s.wg.Add(1)
	s.opts.Metrics.StreamOpened(1)
	return ctx, func() {
		cancel(nil)
		s.mu.Lock()
		delete(s.streams, key)
		s.mu.Unlock()
		s.opts.Metrics.StreamOpened(-1)
		s.wg.Done()
	}, true
}

// stopStreams ends every front end's request, each with its protocol's
// error saying the gateway stops (frontend.ErrStopping); Shutdown calls it.
func (s *Server) stopStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cancel := range s.streams {
		(*cancel)(frontend.ErrStopping)
	}
}

// chatError is a refusal with its HTTP status, which the front ends'
// handlers answer with.
type chatError struct {
	status int
	err    error
	retry  time.Duration // when to try again (Retry-After); 0: not said
}

func (e *chatError) Error() string             { return e.err.Error() }
func (e *chatError) Unwrap() error             { return e.err }
func (e *chatError) StatusCode() int           { return e.status }
func (e *chatError) RetryAfter() time.Duration { return e.retry }

// chatSession returns the session of the request's browser for a front
// end's conversation key, opening it when create is set and there is none.
// The session's id is derived from the front end, the browser and the key,
// so no table maps them: the same browser finds the same session again
// after a restart, and another browser's key can never name it.
func (s *Server) chatSession(r *http.Request, frontEnd, key string, create bool) (*engine.Session, error) {
	browser := browserOf(r.Context())
	if browser == "" {
		return nil, &chatError{status: http.StatusInternalServerError, err: errors.New("the request was not admitted")}
	}
	id := chatSessionID(frontEnd, browser, key)
	eng := s.opts.Engine
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	for range 3 {
		sess, err := eng.LoadOwn(ctx, id, browser)
		switch {
		case err == nil && sess.Owner() == browser:
			return sess, nil
		case err == nil:
			return nil, &chatError{status: http.StatusNotFound, err: fmt.Errorf("%w: there is no chat %q for this browser", errUnknownSession, key)}
		case errors.Is(err, engine.ErrLimitExceeded):
			// Back into memory, past the browser's share.
			return nil, &chatError{status: http.StatusTooManyRequests, err: err}
		case errors.Is(err, engine.ErrOwnedElsewhere):
			return nil, &chatError{status: http.StatusServiceUnavailable, err: fmt.Errorf("chat %q runs on another gateway node: route this browser to it (sticky sessions), or retry: %w", key, err)}
		case errors.Is(err, engine.ErrSessionClosed):
			return nil, &chatError{status: http.StatusGone, err: fmt.Errorf("chat %q has ended: start a new chat", key)}
		case errors.Is(err, engine.ErrCorrupt):
			if s.firstUnreadable(id) {
				s.logger.Error("a session's journal cannot be read: its chat cannot go on until it is repaired (docs/storage.md)", "session", id, "err", err)
			}
			// Its id is this browser's own (derived from it), so saying
			// what is wrong tells no other browser anything.
			return nil, &chatError{status: http.StatusInternalServerError, err: fmt.Errorf("chat %q cannot be opened: the gateway cannot read what it stored of it: start a new chat", key)}
		case !errors.Is(err, engine.ErrNoSession):
			logLoadFailure(s.logger, id, err)
			return nil, &chatError{status: http.StatusServiceUnavailable, err: fmt.Errorf("failed to load chat %q: %w", key, err)}
		}
		if !create {
			return nil, &chatError{status: http.StatusNotFound, err: fmt.Errorf("%w: there is no chat %q for this browser", errUnknownSession, key)}
		}
		refund, ok, wait := s.allowNewSession(browser)
		if !ok {
			s.opts.Metrics.LimitHit(string(engine.WireRateLimited))
			wait = wait.Round(time.Second) + time.Second
			return nil, &chatError{status: http.StatusTooManyRequests, err: fmt.Errorf("this browser opened %d sessions in the last minute, the most it may: try again in %v", s.opts.NewSessionsPerMinute, wait), retry: wait}
		}
		sess, err = eng.Open(ctx, engine.OpenOptions{Owner: browser, ID: id})
		if err != nil {
			refund()
		}
		switch {
		case err == nil:
			s.logger.Info("chat opened", "frontEnd", frontEnd, "session", id)
			return sess, nil
		case errors.Is(err, engine.ErrSessionExists):
			continue // a request of the same chat opened it first
		case errors.Is(err, engine.ErrLimitExceeded):
			return nil, &chatError{status: http.StatusTooManyRequests, err: err}
		default:
			return nil, &chatError{status: http.StatusServiceUnavailable, err: err}
		}
	}
	return nil, &chatError{status: http.StatusConflict, err: fmt.Errorf("chat %q could not be opened: try again", key)}
}

// chatSessionID derives a session id from a front end, a browser and the
// front end's key: 32 characters of a SHA-256, prefixed by the front end.
func chatSessionID(frontEnd, browser, key string) string {
	sum := sha256.Sum256([]byte(frontEnd + "\x00" + browser + "\x00" + key))
	return frontEnd + "_" + idEncoding.EncodeToString(sum[:20])
}

// chatRoutes mounts the HTTP front ends.
func (s *Server) chatRoutes() {
	find := func(frontEnd string) func(r *http.Request, key string, create bool) (*engine.Session, error) {
		return func(r *http.Request, key string, create bool) (*engine.Session, error) {
			return s.chatSession(r, frontEnd, key, create)
		}
	}
	streams := frontend.Options{Logger: s.logger, Buffer: s.opts.SendQueue, WriteTimeout: s.opts.WriteTimeout,
		Check: func(message string, tools []string) error {
			if err := s.opts.Engine.CheckTools(tools); err != nil {
				return err
			}
			return s.opts.Engine.CheckMessage(message)
		},
		Refused: func(err error) {
			// /ws counts these as it refuses them (conn.refuse); the
			// front ends' other refusals at a limit (origin, sockets,
			// rate) are counted where they are made.
			if errors.Is(err, engine.ErrLimitExceeded) {
				s.opts.Metrics.LimitHit(string(engine.WireLimitExceeded))
			}
		},
		LogRefusal: func(msg string, args ...any) { s.logRefusal(slog.LevelInfo, msg, args...) },
	}
	chat := aisdk.New(aisdk.Options{Find: find("aisdk"), Options: streams})
	s.mux.Handle("POST "+RouteAISDK, s.chatRoute(http.HandlerFunc(chat.Post)))
	s.mux.Handle("GET "+RouteAISDKResume, s.chatRoute(http.HandlerFunc(chat.Resume)))
	run := agui.New(agui.Options{Find: find("agui"), Options: streams})
	s.mux.Handle("POST "+RouteAGUI, s.chatRoute(run))
	s.mux.Handle("POST "+RouteAISDKCancel, s.cancelChat("aisdk"))
	s.mux.Handle("POST "+RouteAGUICancel, s.cancelChat("agui"))
	preflight := s.chatRoute(http.NotFoundHandler()) // chatRoute answers OPTIONS itself
	for route, allow := range map[string]string{RouteAISDK: "POST, OPTIONS", RouteAISDKResume: "GET, HEAD, OPTIONS", RouteAGUI: "POST, OPTIONS",
		RouteAISDKCancel: "POST, OPTIONS", RouteAGUICancel: "POST, OPTIONS"} {
		s.mux.Handle("OPTIONS "+route, preflight)
		s.mux.Handle(route, s.wrongMethod(allow))
	}
}

// cancelChat serves a front end's Stop: the model turn of the browser's
// chat {id} and its open calls stop, as /ws's cancel stops them, and the
// answer is 204, whether there was anything to stop or not (a chat this
// browser does not have included, as a resume answers). It holds none of
// the browser's sockets: the stream it stops may not have left yet.
func (s *Server) cancelChat(frontEnd string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.admitOrigin(w, r, "chat request refused") {
			return
		}
		_, browser, ok := s.browserOrRefuse(w, r)
		if !ok {
			return
		}
		// A chat with work in flight is in memory, here or, in a cluster,
		// on the node that holds its lease: that one is named (503, as
		// the other routes do), not taken for a chat with nothing to stop.
		sess, loaded := s.opts.Engine.Session(chatSessionID(frontEnd, browser, r.PathValue("id")))
		if !loaded && s.opts.Relay != nil {
			var err error
			sess, err = s.chatSession(r.WithContext(context.WithValue(r.Context(), browserCtxKey{}, browser)), frontEnd, r.PathValue("id"), false)
			if err != nil {
				status, err := frontend.Status(err)
				if status == http.StatusNotFound || status == http.StatusGone {
					w.WriteHeader(http.StatusNoContent) // no such chat, or one that ended: nothing to stop
					return
				}
				frontend.Refuse(w, err, status)
				return
			}
			loaded = true
		}
		if loaded && sess.Owner() == browser {
			ctx, cancel := opContext(r.Context())
			defer cancel()
			if err := sess.Cancel(ctx); err != nil && !errors.Is(err, engine.ErrSessionClosed) && !errors.Is(err, engine.ErrUnloaded) {
				status, err := frontend.Status(err)
				frontend.Refuse(w, err, status)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// wrongMethod answers a front end's route asked with a method it does not
// take: 405 with the methods it does, and, for a page of an allowed
// origin, the CORS headers every answer carries, so the page reads the 405
// rather than a CORS failure.
func (s *Server) wrongMethod(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.admitOrigin(w, r, "chat request refused") {
			return
		}
		w.Header().Set("Allow", allow)
		frontend.Text(w, fmt.Sprintf("%s is not a method of %s: it takes %s", r.Method, r.URL.Path, allow), http.StatusMethodNotAllowed)
	})
}
