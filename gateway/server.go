package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/clienttools"
	"github.com/clienttools/gateway/engine"
)

// Options configure a Server. Zero fields take their defaults.
type Options struct {
	// Engine runs the sessions. Required.
	Engine *engine.Engine
	// Router delivers client calls; it must be the engine's ClientRouter.
	// Required.
	Router *clienttools.Router
	// Sessions is the cookie session manager. Default: scs.New() with a
	// 24h lifetime, HttpOnly, SameSite Lax, in memory: browsers get new
	// identities when the process restarts. (scs.New starts a cleanup
	// goroutine that lives as long as the process.)
	Sessions *scs.SessionManager
	// OriginPatterns are the hosts, besides the gateway's own, whose pages
	// may open /ws (path.Match patterns such as "example.com" or
	// "*.example.com"). Default: none, only same-origin pages. "*" lets any
	// site's page talk to a browser's sessions: never in production.
	OriginPatterns []string
	// ReadLimit is the largest frame a browser may send, in bytes; default
	// 1 MiB. A larger frame closes the connection with 1009.
	ReadLimit int64
	// SendQueue is how many frames may wait for a slow browser; default
	// 256. When it overflows, the connection is closed with 1008 and the
	// page resumes from its last seq, so nothing is lost but the socket.
	SendQueue int
	// PingInterval is how often an idle connection is pinged to detect a
	// dead peer; default 20s. Zero uses the default; negative disables.
	PingInterval time.Duration
	// SessionIdle is how long a session lives with no page connected before
	// it ends (reason "abandoned"); default 15m. A reload or a network drop
	// reconnects well within it; longer keeps abandoned chats in memory.
	SessionIdle time.Duration
	// WriteTimeout bounds one frame's write; default 10s.
	WriteTimeout time.Duration
	// Page renders GET /. Default: a minimal page.
	Page http.Handler
	// Static is served under /static/. Default: nothing.
	Static fs.FS
	// Logger gets one line per connection event. Default: slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP side of the gateway.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	logger  *slog.Logger
	mu      sync.Mutex
	conns   map[*conn]struct{}
	owners  map[string]*owned // by engine session id
	closing bool
	wg      sync.WaitGroup
}

const browserKey = "browser"

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil || opts.Router == nil {
		return nil, errors.New("gateway: Options.Engine and Options.Router are required")
	}
	if opts.Sessions == nil {
		sm := scs.New()
		sm.Lifetime = 24 * time.Hour
		sm.Cookie.Name = "gateway_session"
		sm.Cookie.HttpOnly = true
		sm.Cookie.SameSite = http.SameSiteLaxMode
		opts.Sessions = sm
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = 1 << 20
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = 256
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = 20 * time.Second
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = 15 * time.Minute
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, logger: opts.Logger, conns: map[*conn]struct{}{}, owners: map[string]*owned{}}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	page := s.opts.Page
	if page == nil {
		page = http.HandlerFunc(minimalPage)
	}
	s.mux.Handle("GET /{$}", s.opts.Sessions.LoadAndSave(s.identify(page)))
	if s.opts.Static != nil {
		s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(s.opts.Static)))
	}
	s.mux.HandleFunc("GET /healthz", s.health)
	// /ws loads the cookie session itself: LoadAndSave wraps the
	// ResponseWriter, which the WebSocket upgrade needs to hijack.
	s.mux.HandleFunc("GET /ws", s.serveWS)
}

// Handler returns the server's routes, with panics recovered.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logger.Error("handler panicked", "path", r.URL.Path, "panic", p)
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		s.mux.ServeHTTP(w, r)
	})
}

// identify gives the browser an id in its cookie session.
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Sessions.GetString(r.Context(), browserKey) == "" {
			s.opts.Sessions.Put(r.Context(), browserKey, newBrowserID())
		}
		next.ServeHTTP(w, r)
	})
}

// browserFor loads the cookie session of a /ws request, creating one (and
// its cookie on the upgrade response) when the browser has none yet.
func (s *Server) browserFor(w http.ResponseWriter, r *http.Request) (string, error) {
	sm := s.opts.Sessions
	var token string
	if c, err := r.Cookie(sm.Cookie.Name); err == nil {
		token = c.Value
	}
	ctx, err := sm.Load(r.Context(), token)
	if err != nil {
		return "", fmt.Errorf("failed to load cookie session: %w", err)
	}
	if id := sm.GetString(ctx, browserKey); id != "" {
		return id, nil
	}
	id := newBrowserID()
	sm.Put(ctx, browserKey, id)
	token, expiry, err := sm.Commit(ctx)
	if err != nil {
		return "", fmt.Errorf("failed to save cookie session: %w", err)
	}
	sm.WriteSessionCookie(ctx, w, token, expiry)
	return id, nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "sessions": s.opts.Engine.Sessions(), "connections": n})
}

func minimalPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html><title>Gateway</title><p>The gateway is running; connect to /ws.</p>`)
}

// owned is what the server knows of a session it opened.
type owned struct {
	browser string
	conns   int         // connections attached now
	expiry  *time.Timer // ends the session once no page has been attached for SessionIdle
}

// adopt records that browser owns a new engine session, until it ends.
func (s *Server) adopt(sess *engine.Session, browser string) {
	s.mu.Lock()
	s.owners[sess.ID()] = &owned{browser: browser}
	s.mu.Unlock()
	go func() {
		<-sess.Done()
		s.forget(sess.ID())
		s.opts.Router.Forget(sess.ID())
	}()
}

func (s *Server) owner(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[session]; o != nil {
		return o.browser
	}
	return ""
}

func (s *Server) forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[session]; o != nil && o.expiry != nil {
		o.expiry.Stop()
	}
	delete(s.owners, session)
}

// attached counts a page connected to session; it is no longer abandoned.
func (s *Server) attached(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[session]; o != nil {
		o.conns++
		if o.expiry != nil {
			o.expiry.Stop()
			o.expiry = nil
		}
	}
}

// detached counts a page gone; with none left, the session ends after
// SessionIdle unless a page comes back.
func (s *Server) detached(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[session]
	if o == nil {
		return
	}
	if o.conns--; o.conns > 0 || s.closing {
		return
	}
	o.expiry = time.AfterFunc(s.opts.SessionIdle, func() { s.expire(session, o) })
}

// expire ends a session no page has come back to.
func (s *Server) expire(session string, o *owned) {
	s.mu.Lock()
	abandoned := s.owners[session] == o && o.conns == 0 && !s.closing
	s.mu.Unlock()
	if !abandoned {
		return
	}
	if sess, ok := s.opts.Engine.Session(session); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.logger.Info("session abandoned", "session", session, "idle", s.opts.SessionIdle)
		sess.End(ctx, "abandoned: no page connected for "+s.opts.SessionIdle.String())
	}
}

// track registers a live connection; false once shutting down.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Shutdown closes every WebSocket with 1001 going away, refuses new ones,
// and waits for their handlers, or for ctx. http.Server.Shutdown does not
// wait for hijacked connections: call this after it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, o := range s.owners {
		if o.expiry != nil {
			o.expiry.Stop()
		}
	}
	open := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.close(statusGoingAway, "the gateway is shutting down")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("failed to close connections: %w", ctx.Err())
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newBrowserID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}
