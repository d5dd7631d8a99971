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
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
	"github.com/clienttools/gateway/gateway/sse"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/runners"
	"golang.org/x/time/rate"
)

// Options configure a Server. Zero fields take their defaults.
type Options struct {
	// Engine runs the sessions, and knows which browser owns each.
	// Required.
	Engine *engine.Engine
	// Identify, when set, says who a request's browser is, in place of the
	// identity cookie: the app's own login (a session it checks, a header
	// its proxy sets), so that a person's chats are theirs on every device
	// and no one else's on a shared one. What it returns owns the chats
	// (engine.Session.Owner, which a worker reads), and the limits of one
	// browser's share (MaxSockets, NewSessionsPerMinute, the engine's
	// MaxLiveSessions) count per it. An error, "", or more than 512 bytes
	// refuses the request with 401 (one wrapping engine.ErrStoreUnavailable, 503 with
	// Retry-After); check the login in front of the gateway to answer
	// otherwise (a redirect to it). The gateway then sets no cookie, and
	// Sessions and the Cookie options go unused.
	Identify func(r *http.Request) (string, error)
	// Sessions is the cookie session manager. Default: scs.New() with
	// CookieLifetime, which visits renew (browserFor), HttpOnly, SameSite
	// Lax, on CookieStore. (scs.New starts a cleanup goroutine of its
	// in-memory store, even when CookieStore replaces it, that lives as
	// long as the process: goleak ignores memstore.(*MemStore).startCleanup.)
	Sessions *scs.SessionManager
	// CookieLifetime is how long a browser's identity lives after its last
	// visit, in the default Sessions. Default: CookieLifetime (30 days, as
	// long as a session is kept); the command gives it --retain.
	CookieLifetime time.Duration
	// CookieStore keeps the browsers' identities for the default Sessions.
	// Default: the engine's store's, when it keeps them (the JetStream
	// store's Cookies), so a browser is recognised after a restart and
	// may resume its chats; else scs's in memory, so browsers get new
	// identities when the process restarts. An error
	// wrapping engine.ErrStoreUnavailable tells a browser to come back
	// (503, Retry-After); any other, that it failed (500).
	CookieStore scs.Store
	// Clock tells when an identity is due for renewal (browserFor), and
	// times a browser's allowances: its new sessions a minute and its
	// refused frames (the rate_limited slowdown). Default: clock.Real.
	Clock clock.Clock
	// CookieSameSite and CookieSecure set the default Sessions' cookie:
	// default SameSite Lax, not Secure. A chat page on another site than
	// the gateway needs SameSite None, which browsers take only with
	// Secure (set for it): else the browser sends no cookie on the page's
	// /ws, and gets a new identity, and loses its chats, on every load.
	CookieSameSite http.SameSite
	CookieSecure   bool
	// OriginPatterns are the hosts, besides the gateway's own, whose pages
	// may open /ws (path.Match patterns such as "example.com" or
	// "*.example.com"). Default: none, only same-origin pages. "*" lets any
	// site's page talk to a browser's sessions: never in production.
	OriginPatterns []string
	// Hosts are the names (path.Match patterns, any case) the gateway
	// answers to besides IP addresses, localhost and OriginPatterns: a
	// request for another Host is refused with 403, so a page on a name
	// that rebinds to this machine cannot drive it. "*": any name.
	// /healthz answers any Host.
	Hosts []string
	// MaxSockets is how many WebSockets one browser (its cookie) may hold
	// open on this node; default DefaultMaxSockets (32), negative: no
	// limit. One more is closed at once with 4002.
	MaxSockets int
	// NewSessionsPerMinute is how many new sessions one browser may open
	// a minute on this node (a burst of as many, then one every 60/N s);
	// default DefaultNewSessionsPerMinute (30), negative: no limit. One
	// more is refused with rate_limited, saying when to try again.
	NewSessionsPerMinute int
	// ReadLimit is the largest frame a browser may send, in bytes; default
	// DefaultReadLimit (1 MiB). A larger frame closes the connection with
	// 1009. Lower, a tool's large result no longer fits in its answer;
	// higher, each page may make the node hold that much per frame it reads.
	ReadLimit int64
	// CompressOver, when above 0, negotiates permessage-deflate with a
	// browser that offers it, as every current browser does, and sends
	// its frames of at least this many bytes compressed: a long chat's
	// replay, its long messages and tool results, cross a slow network in
	// a fraction of their bytes, and the stream's deltas go as they are.
	// Each frame is compressed on its own (no context kept between
	// frames), by the page's writer goroutine, never the session's. Off
	// by default (0): a browser then compresses every frame it sends, and
	// the WebSocket library keeps a 4 KiB inflate buffer for each page
	// from its first such frame until its socket closes, more than an
	// idle page's whole budget over the socket's own (benchmarks.md).
	CompressOver int
	// SendQueue is how many frames may wait for a slow browser; default
	// DefaultSendQueue (256). When it overflows, the connection is closed
	// with 1008 and the page resumes from its last seq, so nothing is lost
	// but the socket. Larger holds longer bursts at the cost of memory per
	// slow page.
	SendQueue int
	// RefusedBurst and RefusedRate bound the frames a page may send that
	// the gateway refuses (each still gets its error reply): past a burst
	// of RefusedBurst (default 100), the connection's frames are read at
	// RefusedRate a second (default 20) until the page stops, and it is
	// told once (rate_limited). The connection stays up.
	RefusedBurst int
	RefusedRate  float64
	// PingInterval is how often each connection is pinged, and how long its
	// pong may take; default 20s. A page that misses it is closed (4000),
	// and the client calls it ran move to another page of the session:
	// shorter moves them sooner, at the cost of closing pages on a slow
	// network. Zero uses the default; negative disables.
	PingInterval time.Duration
	// ChatBodyLimit bounds the body of a request to the HTTP front ends
	// (POST /api/chat, POST /ag-ui), which carry the whole conversation;
	// default DefaultChatBodyLimit (8 MiB). A larger body is refused with
	// 413. Larger lets longer chats post, at the cost of memory per request.
	ChatBodyLimit int64
	// ChatBodyTimeout bounds the reading of that body, with a second more
	// for each 16 KiB its Content-Length says (ChatBodyLimit's when it
	// says none); default DefaultChatBodyTimeout (1 min). A body not in by
	// then is refused with 408, and its connection is not held open by a
	// client that sends slowly or never ends.
	ChatBodyTimeout time.Duration
	// WriteTimeout bounds one frame's write; default DefaultWriteTimeout
	// (10s, as a front end's event: sse.DefaultWriteTimeout). A page whose
	// socket takes no frame for that long loses it (it resumes); longer
	// keeps a dead peer's writer and memory that much longer.
	WriteTimeout time.Duration
	// Relay serves pages connected to other nodes whose sessions run here,
	// and pipes this node's pages to the node that runs their session.
	// Default: none; such a page is closed with 4001 and reconnects.
	Relay *Relay
	// Page renders GET /. Default: a minimal page.
	Page http.Handler
	// Static is served under /static/. Default: nothing.
	Static fs.FS
	// MetricsHandler serves GET /metrics; nil: no such route (the binary
	// serves it here, or on --metrics-listen).
	MetricsHandler http.Handler
	// Metrics records pages, frames and limits hit; nil: nothing. The
	// engine's Options.Metrics is usually the same.
	Metrics *metrics.Metrics
	// Logger gets one line per connection event. Default: slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP side of the gateway.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	hosts  http.Handler // mux behind the Host check
	logger *slog.Logger
	// refusalLog and refusalsUnlogged bound the lines refused requests
	// log (logRefusal).
	refusalLog       *rate.Limiter
	refusalsUnlogged atomic.Int64
	mu               sync.Mutex
	conns            map[*conn]struct{}
	closing          bool
	wg               sync.WaitGroup
	// writers run the pages' writers (conn.write), keeping the stacks
	// they grew between one burst of frames and the next. stuckWriters
	// are those of them waiting on a socket that did not take their batch
	// at once (corkConn.send): not at work for the other pages.
	writers      runners.Pool
	stuckWriters atomic.Int64
	// plainOverHTTPS: a request came over HTTPS while the identity cookie
	// is not Secure, and the log said so (plainCookieOverHTTPS).
	plainOverHTTPS atomic.Bool

	streams     map[*context.CancelCauseFunc]struct{} // the HTTP front ends' requests; chats.go
	shares      map[string]*share                     // by browser id; admission.go
	sharesSwept time.Time
	// unreadable: the sessions whose damaged journal was logged at ERROR,
	// and when (firstUnreadable).
	unreadable map[string]time.Time
	// cookieless: the origins whose pages resumed a session with no
	// identity cookie, logged at WARN, and when (firstCookieless).
	cookieless map[string]time.Time
}

const browserKey = "browser"

// hostMintedKey marks an identity given under SecureCookieName: one that
// comes under the plain name alone was put there by someone else (cookie
// tossing), and is not moved. hostSinceKey is when an identity from before
// the switch first came under SecureCookieName (Unix seconds).
const (
	hostMintedKey = "hostMinted"
	hostSinceKey  = "hostSince"
)

// Defaults of Options.
const (
	DefaultSendQueue    = engine.DefaultPageBuffer
	DefaultRefusedBurst = 100
	DefaultRefusedRate  = 20
	DefaultPingInterval = 20 * time.Second
	DefaultMaxSockets   = 32
	// DefaultWriteTimeout is Options.WriteTimeout's default: a /ws frame's
	// write is bounded as a front end's event is.
	DefaultWriteTimeout = sse.DefaultWriteTimeout
	// DefaultReadLimit is Options.ReadLimit's default: 1 MiB, room for a
	// tool's large result; the SDK's copy is static/connection.js's
	// DEFAULT_LIMITS.frameBytes.
	DefaultReadLimit = 1 << 20
	// DefaultNewSessionsPerMinute is Options.NewSessionsPerMinute's default.
	DefaultNewSessionsPerMinute = 30
	// CookieLifetime is Options.CookieLifetime's default: as long as a
	// session is kept (engine.DefaultRetain), so a browser that comes back
	// finds the chats the store still has.
	CookieLifetime = engine.DefaultRetain
)

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("gateway: Options.Engine is required")
	}
	// A bad pattern matches nothing: say so now, not with a 403 at the
	// first page.
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"OriginPatterns", opts.OriginPatterns}, {"Hosts", opts.Hosts}} {
		for _, p := range list.patterns {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("gateway: Options.%s: %q is not a pattern: %w", list.name, p, err)
			}
		}
	}
	if opts.Sessions == nil {
		sm := scs.New()
		if opts.CookieStore == nil {
			if st, ok := opts.Engine.Store().(interface{ Cookies() scs.Store }); ok {
				opts.CookieStore = st.Cookies()
			}
		}
		if opts.CookieStore != nil {
			sm.Store = opts.CookieStore
		}
		sm.Lifetime = opts.CookieLifetime
		if sm.Lifetime <= 0 {
			sm.Lifetime = CookieLifetime
		}
		sm.Cookie.Name = CookieName
		sm.Cookie.HttpOnly = true
		sm.Cookie.SameSite = http.SameSiteLaxMode
		if opts.CookieSameSite != 0 {
			sm.Cookie.SameSite = opts.CookieSameSite
		}
		sm.Cookie.Secure = opts.CookieSecure || sm.Cookie.SameSite == http.SameSiteNoneMode
		if sm.Cookie.Secure {
			// A page of a sibling subdomain may set a cookie of the plain
			// name for the whole domain (cookie tossing), which a request
			// then carries first; none may set one named __Host-.
			sm.Cookie.Name = SecureCookieName
		}
		opts.Sessions = sm
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = DefaultSendQueue
	}
	if opts.RefusedBurst <= 0 {
		opts.RefusedBurst = DefaultRefusedBurst
	}
	if opts.RefusedRate <= 0 {
		opts.RefusedRate = DefaultRefusedRate
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.ChatBodyLimit <= 0 {
		opts.ChatBodyLimit = DefaultChatBodyLimit
	}
	if opts.ChatBodyTimeout <= 0 {
		opts.ChatBodyTimeout = DefaultChatBodyTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxSockets == 0 {
		opts.MaxSockets = DefaultMaxSockets
	}
	if opts.NewSessionsPerMinute == 0 {
		opts.NewSessionsPerMinute = DefaultNewSessionsPerMinute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, logger: opts.Logger, conns: map[*conn]struct{}{}, shares: map[string]*share{},
		refusalLog: rate.NewLimiter(refusalLogRate, refusalLogBurst)}
	warnWide(opts)
	s.routes()
	if opts.Relay != nil {
		if err := opts.Relay.serve(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	page := s.opts.Page
	if page == nil {
		page = http.HandlerFunc(minimalPage)
	}
	s.mux.Handle("GET /{$}", s.identify(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The chat page runs tools on the user's behalf, an Approve
		// button among them: no other site may frame it to steer a click
		// (a Page that wants to be framed sets its own policy).
		h := w.Header()
		h.Set("Content-Security-Policy", "frame-ancestors 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		page.ServeHTTP(w, r)
	})))
	if s.opts.Static != nil {
		// Any site may import the SDK: it is public code, fetched without
		// credentials, and an ES module from another origin needs CORS.
		files := http.StripPrefix("/static/", http.FileServerFS(s.opts.Static))
		s.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/") {
				http.NotFound(w, r) // files, not listings of folders
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			files.ServeHTTP(w, r)
		}))
	}
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /readyz", s.ready)
	if s.opts.MetricsHandler != nil {
		s.mux.Handle("GET /metrics", s.opts.MetricsHandler)
	}
	list := s.identify(http.HandlerFunc(s.listSessions))
	s.mux.Handle("GET /sessions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.admitOrigin(w, r, "chat list refused") { // before the cookie: a refused page gets none
			list.ServeHTTP(w, r)
		}
	}))
	del := http.HandlerFunc(s.deleteSession) // answers its preflight too
	s.mux.Handle("DELETE /sessions/{id}", del)
	s.mux.Handle("OPTIONS /sessions/{id}", del)
	s.mux.Handle("/sessions/{id}", s.wrongMethod("DELETE, OPTIONS"))
	s.mux.HandleFunc("GET /ws", s.serveWS) // identifies the browser itself, before its upgrade
	s.chatRoutes()
	s.hosts = s.checkHost(s.mux)
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
				frontend.Text(w, "internal error", http.StatusInternalServerError)
			}
		}()
		s.hosts.ServeHTTP(w, r)
	})
}

// identify gives the request the browser's identity (browserFor): its
// handler reads it from the request's context (browserOf).
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Cookie")
		ctx, browser, ok := s.browserOrRefuse(w, r)
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, browserCtxKey{}, browser)))
	})
}

// browserOf is the browser's id that identify, or chatRoute, put in ctx
// (browserCtxKey).
func browserOf(ctx context.Context) string {
	id, _ := ctx.Value(browserCtxKey{}).(string)
	return id
}

// maxIdentity bounds what Options.Identify may return: it keys every
// summary of the person's chats.
const maxIdentity = 512

// errNotIdentified: Options.Identify did not say who the browser is.
var errNotIdentified = errors.New("the request carries no identity the app accepts")

// browserOrRefuse is browserFor, answering (and logging why) when the
// cookie session cannot be loaded: 503 with Retry-After while the store
// that keeps the identities is unavailable (a CookieStore says so with
// engine.ErrStoreUnavailable), 500 for anything else.
func (s *Server) browserOrRefuse(w http.ResponseWriter, r *http.Request) (context.Context, string, bool) {
	ctx, browser, err := s.browserFor(w, r)
	switch {
	case errors.Is(err, engine.ErrStoreUnavailable):
		// The identities are the store's (NATS): the browser tries again.
		s.logger.Warn("failed to identify browser: the store is unavailable", "err", err)
		w.Header().Set("Retry-After", "5")
		frontend.Text(w, "the gateway's session store is unavailable, and with it who this browser is: try again in a moment", http.StatusServiceUnavailable)
		return nil, "", false
	case errors.Is(err, errNotIdentified):
		s.logRefusal(slog.LevelInfo, "request refused: Identify said no one", "path", r.URL.Path, "err", err)
		frontend.Text(w, "who this browser is could not be told: log in again", http.StatusUnauthorized)
		return nil, "", false
	case err != nil:
		// Not the store's trouble (an identity it keeps that does not
		// read back): trying again would find the same.
		s.logger.Error("failed to identify browser", "err", err)
		frontend.Text(w, "the gateway could not tell who this browser is", http.StatusInternalServerError)
		return nil, "", false
	}
	return ctx, browser, true
}

// browserFor loads the request's cookie session and returns the browser's
// id, with a context that carries the session. A browser with none gets a
// new identity, its cookie on the response (the WebSocket's upgrade
// response too: scs's LoadAndSave wraps the ResponseWriter, which the
// upgrade must hijack). An identity lives its Lifetime after the last
// visit: one last renewed an hour ago or more (a 24th of a Lifetime under a
// day) is renewed, cookie and stored entry, so a browser that keeps coming
// keeps its chats, and the store is written at most once an hour a
// browser. A renewal the store refuses is logged and the visit goes on: the
// identity lives to its deadline.
func (s *Server) browserFor(w http.ResponseWriter, r *http.Request) (context.Context, string, error) {
	if s.opts.Identify != nil {
		id, err := s.opts.Identify(r)
		switch {
		case errors.Is(err, engine.ErrStoreUnavailable):
			return nil, "", err
		case err != nil:
			return nil, "", fmt.Errorf("%w: %w", errNotIdentified, err)
		case id == "":
			return nil, "", fmt.Errorf("%w: Identify returned no identity", errNotIdentified)
		case len(id) > maxIdentity:
			return nil, "", fmt.Errorf("%w: Identify returned an identity of %d bytes, over %d", errNotIdentified, len(id), maxIdentity)
		}
		return r.Context(), id, nil
	}
	sm := s.opts.Sessions
	token, moving := s.identityToken(r)
	secure := sm.Cookie.Name == SecureCookieName
	if !s.plainOverHTTPS.Load() {
		s.plainCookieOverHTTPS(r, sm)
	}
	ctx, err := sm.Load(r.Context(), token)
	if err != nil {
		return nil, "", fmt.Errorf("failed to load cookie session: %w", err)
	}
	now := s.opts.Clock.Now()
	id := sm.GetString(ctx, browserKey)
	if id != "" && moving && !movable(sm, ctx, now) {
		// Put under the plain name by someone else, for the whole
		// domain (cookie tossing): not this browser's.
		if ctx, err = sm.Load(r.Context(), ""); err != nil {
			return nil, "", fmt.Errorf("failed to load cookie session: %w", err)
		}
		id = ""
	}
	if id != "" && secure && !sm.GetBool(ctx, hostMintedKey) && sm.GetInt64(ctx, hostSinceKey) == 0 {
		// First under __Host- (moved now, or sent so by hand): from now
		// on it moves from the plain name only for moveWindow.
		sm.Put(ctx, hostSinceKey, now.Unix())
		if err := giveIdentity(ctx, w, sm); err != nil {
			return nil, "", err
		}
		return ctx, id, nil
	}
	if id != "" {
		// Renewed when the last renewal is an hour old or more, and when
		// it was made for a longer lifetime (--retain made shorter): the
		// store forgets an entry its lifetime after the entry was written,
		// so one not written again would go with the browser still here.
		slack := min(time.Hour, sm.Lifetime/24)
		if left := sm.Deadline(ctx).Sub(now); !moving && (sm.Lifetime <= 0 || left >= sm.Lifetime-slack && left <= sm.Lifetime+slack) {
			return ctx, id, nil
		}
		sm.SetDeadline(ctx, now.Add(sm.Lifetime).UTC())
		if err := giveIdentity(ctx, w, sm); err != nil {
			s.logger.Warn("failed to renew a browser's identity; it lives to its deadline", "browser", id, "err", err)
		}
		return ctx, id, nil
	}
	if token != "" {
		// Expired, or never this store's: a run on another data
		// directory or store replaces the browser's only key to its
		// chats, which the operator should hear of.
		s.logRefusal(slog.LevelWarn, "a browser's identity cookie is not one this store keeps (expired; or this gateway runs on another data directory or store than the one that gave it): it gets a new identity, and its chats are not this one's", "path", r.URL.Path)
	}
	id = newBrowserID()
	sm.Put(ctx, browserKey, id)
	if secure {
		sm.Put(ctx, hostMintedKey, true)
	}
	if err := giveIdentity(ctx, w, sm); err != nil {
		return nil, "", err
	}
	return ctx, id, nil
}

// moveWindow is how long after it first came under __Host- an identity
// may still come under the plain name alone and be moved: a browser's
// other tabs, or the AI SDK's resume beside its post, sent the plain
// cookie before the move's answer set the new one.
const moveWindow = 10 * time.Minute

// movable reports whether the identity of ctx, which came under the plain
// name alone, is this browser's to keep under __Host-: one given under
// __Host- never is (another site put it there), one from before the
// switch is until moveWindow after it first came under __Host-.
func movable(sm *scs.SessionManager, ctx context.Context, now time.Time) bool {
	if sm.GetBool(ctx, hostMintedKey) {
		return false
	}
	since := sm.GetInt64(ctx, hostSinceKey)
	return since == 0 || now.Sub(time.Unix(since, 0)) < moveWindow
}

// giveIdentity stores the cookie session of ctx and sets its cookie on w;
// a Secure one under the plain name too, for nodes of the version before
// (a rolling deploy, a rollback), which read that name alone.
func giveIdentity(ctx context.Context, w http.ResponseWriter, sm *scs.SessionManager) error {
	token, expiry, err := sm.Commit(ctx)
	if err != nil {
		return fmt.Errorf("failed to save cookie session: %w", err)
	}
	sm.WriteSessionCookie(ctx, w, token, expiry)
	if sm.Cookie.Name == SecureCookieName {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", Expires: time.Unix(expiry.Unix()+1, 0).UTC(),
			MaxAge: int(time.Until(expiry).Seconds() + 1), HttpOnly: true, Secure: true, SameSite: sm.Cookie.SameSite})
	}
	return nil
}

// CookieName is the browser identity's cookie; SecureCookieName is its
// name when the cookie is Secure (CookieSecure, or SameSite=None).
const (
	CookieName       = "gateway_session"
	SecureCookieName = "__Host-gateway_session"
)

// identityToken is the identity cookie r carries, "" for none; moving: it
// came under the plain name, to be set under SecureCookieName.
func (s *Server) identityToken(r *http.Request) (token string, moving bool) {
	if c, err := r.Cookie(s.opts.Sessions.Cookie.Name); err == nil {
		token = c.Value
	}
	if token == "" && s.opts.Sessions.Cookie.Name == SecureCookieName {
		return plainCookie(r), true
	}
	return token, false
}

// plainCookie is the identity a browser kept under CookieName before the
// cookie was Secure (an upgrade, or --cookie-secure set since), which it
// keeps under SecureCookieName from then on: "" when it has none, or more
// than one (one may be another site's, tossed from a sibling subdomain).
// One given under SecureCookieName is not moved (hostKey): an identity
// from before the switch can still be tossed until it expires, --retain
// after its last visit.
func plainCookie(r *http.Request) string {
	var token string
	for _, c := range r.CookiesNamed(CookieName) {
		if token != "" && c.Value != token {
			return ""
		}
		token = c.Value
	}
	return token
}

// health answers GET /healthz, the liveness probe: 200 {"status":"ok"}, or
// 200 {"status":"degraded","store":"..."} while the session store refuses
// events (new turns are refused meanwhile, and /readyz says 503): a restart
// would not help.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n, streams := len(s.conns), len(s.streams)
	s.mu.Unlock()
	body := map[string]any{"status": "ok", "sessions": s.opts.Engine.Loaded(), "connections": n, "streams": streams}
	if err := s.opts.Engine.Health(); err != nil {
		body["status"], body["store"] = "degraded", err.Error()
	}
	writeJSON(w, http.StatusOK, body)
}

// ready answers GET /readyz: 200 {"status":"ready"} while the gateway can
// take new sessions, else 503 {"status":"not ready","why":"..."}: the
// store refuses events, or the gateway is shutting down. A load balancer
// sends new browsers elsewhere meanwhile; /healthz stays 200 (the process
// is alive, restarting it would not help).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	why := ""
	if err := s.opts.Engine.Health(); err != nil {
		why = err.Error()
	}
	if closing {
		why = "the gateway is shutting down"
	}
	if why != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "why": why})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// listSessions answers GET /sessions: this browser's chats, newest first,
// each with its title (from its first user message).
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Engine.List(r.Context(), browserOf(r.Context()))
	if err != nil {
		s.logger.Error("failed to list sessions", "err", err)
		frontend.Text(w, "could not list the sessions: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	type item struct {
		ID      string    `json:"id"`
		Title   string    `json:"title"`
		Created time.Time `json:"created"`
		Updated time.Time `json:"updated"`
		Ended   bool      `json:"ended,omitempty"`
	}
	out := struct {
		Sessions []item `json:"sessions"`
	}{Sessions: []item{}}
	for _, sum := range list {
		out.Sessions = append(out.Sessions, item{ID: sum.ID, Title: sum.Title, Created: sum.Created, Updated: sum.Updated, Ended: sum.Ended})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

func minimalPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html><title>Gateway</title><p>The gateway is running; connect to /ws.</p>`)
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
	if !c.relayed() {
		s.opts.Metrics.PageConnected(1)
	}
	return true
}

// relayed reports whether c is a page another node holds the socket of,
// which that node counts among its pages.
func (c *conn) relayed() bool {
	_, ok := c.ws.(*remoteSocket)
	return ok
}

// relayedConns lists the connections of pages this node serves for other
// nodes (the relay's).
func (s *Server) relayedConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var relayed []*conn
	for c := range s.conns {
		if c.relayed() {
			relayed = append(relayed, c)
		}
	}
	return relayed
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if !c.relayed() {
		s.opts.Metrics.PageConnected(-1)
	}
	s.wg.Done()
}

// ShutdownServer shuts down srv, the http.Server that serves Handler, and
// the gateway (Shutdown) at the same time, and returns both's errors.
// Neither is enough alone, nor one after the other: srv's Shutdown waits
// for the front ends' open streams, which only the gateway ends, and does
// not wait for the WebSockets, which the gateway closes and waits for.
func (s *Server) ShutdownServer(ctx context.Context, srv *http.Server) error {
	own := make(chan error, 1)
	go func() { own <- s.Shutdown(ctx) }()
	return errors.Join(srv.Shutdown(ctx), <-own)
}

// Shutdown closes every WebSocket with 1001 going away, ends the front
// ends' streams, refuses new ones, and waits for their handlers, or for
// ctx. Run it alongside http.Server.Shutdown, as ShutdownServer does.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.opts.Relay != nil {
		s.opts.Relay.stop()
	}
	// The pages leave because the gateway stops, not on their own: the
	// calls they run wait for the next process (engine.Engine.Closing).
	s.opts.Engine.Closing()
	s.mu.Lock()
	s.closing = true
	open := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.close(engine.CloseGoingAway, "the gateway is shutting down")
	}
	s.stopStreams()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.writers.Close(true)
		return nil
	case <-ctx.Done():
		s.writers.Close(false)
		return fmt.Errorf("failed to close connections: %w", ctx.Err())
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newBrowserID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}
