package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
	"github.com/coder/websocket"
	"golang.org/x/time/rate"
)

// The bounds on one browser's share of a gateway node, and on who may reach
// it: which Host names it answers (a page on a name that rebinds to
// 127.0.0.1 must not drive a local gateway and spend its model key), which
// Origins may open /ws, how many sockets a browser (its cookie) holds and
// how fast it opens sessions. All are per node.

// hostAllowed reports whether a request for host (a Host header, with or
// without a port) may be served: an IP address, localhost or a name under
// .localhost, or a name matching one of patterns (path.Match, any case;
// "*" allows every name). A rebinding attack needs a name of its own, so
// addresses are safe to answer.
func hostAllowed(host string, patterns []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), host); ok {
			return true
		}
	}
	return false
}

// probe are the routes that answer any Host: probes and scrapers come by
// address or by a name of their own, and say nothing about a user.
var probe = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// checkHost refuses, with 403 and a text that says how to allow it, a
// request whose Host is not one the gateway answers, but on the probe
// routes.
func (s *Server) checkHost(next http.Handler) http.Handler {
	patterns := append([]string(nil), s.opts.Hosts...)
	for _, p := range s.opts.OriginPatterns {
		patterns = append(patterns, originHost(p))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probe[r.URL.Path] || hostAllowed(r.Host, patterns) {
			next.ServeHTTP(w, r)
			return
		}
		s.opts.Metrics.LimitHit("host")
		s.logRefusal(slog.LevelWarn, "request refused for its Host", "host", r.Host, "path", r.URL.Path, "remote", r.RemoteAddr)
		frontend.Text(w, fmt.Sprintf("Host %s is not a name this gateway answers to; its operator can allow it with --hosts", clip.Quote(r.Host, maxQuoted)), http.StatusForbidden)
	})
}

// originHost is the host part of an Origin pattern, the name a Host header
// carries, which the Host check answers to: without the scheme
// ("https://app.example.com") or the port ("app.example.com:8443") the
// pattern may name.
func originHost(pattern string) string {
	if _, rest, ok := strings.Cut(pattern, "://"); ok {
		pattern = rest
	}
	if i := strings.LastIndexByte(pattern, ':'); i >= 0 && !strings.Contains(pattern[i:], "]") {
		pattern = pattern[:i]
	}
	return pattern
}

// originAllowed is the WebSocket library's own Origin check, made before
// the upgrade so that a refused page gets no cookie: no Origin (not a
// browser), the same host, or a host matching OriginPatterns.
func (s *Server) originAllowed(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the Origin %s is not a URL with a host, which --origins cannot allow", clip.Quote(origin, maxQuoted))
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, p := range s.opts.OriginPatterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	return fmt.Errorf("pages of %s may not use this gateway's %s (--origins)", clip.Marked(u.Host, maxQuoted, "..."), clip.Marked(r.URL.Path, maxQuoted, "..."))
}

// admitOrigin admits an HTTP request a page makes with its cookie (the
// front ends, GET /sessions): one from a page the Origin check refuses
// gets 403 naming it, logged as refused; one from an allowed page of
// another origin (--origins) may read the answer with its cookie: CORS
// with credentials.
func (s *Server) admitOrigin(w http.ResponseWriter, r *http.Request, refused string) bool {
	if err := s.originAllowed(r); err != nil {
		s.opts.Metrics.LimitHit("origin")
		s.logRefusal(slog.LevelInfo, refused, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "err", err)
		frontend.Text(w, err.Error(), http.StatusForbidden)
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}
	return true
}

// refuseOrigin tells a page whose origin is refused why, in a way it can
// read: a browser shows a page nothing of a failed upgrade, so the upgrade
// is accepted only to be closed at once with 4003 and the reason. Nothing
// is read from the socket, and no cookie is given. A request that is not
// an upgrade gets 403.
func (s *Server) refuseOrigin(w http.ResponseWriter, r *http.Request, why error) {
	s.logRefusal(slog.LevelInfo, "websocket upgrade refused", "origin", r.Header.Get("Origin"), "err", why)
	s.opts.Metrics.LimitHit("origin")
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		frontend.Text(w, why.Error(), http.StatusForbidden)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // a broken upgrade: Accept has answered
	}
	_ = ws.Close(websocket.StatusCode(engine.CloseForbidden), clipReason(why.Error()))
}

// clipReason fits a close reason in a close frame (123 bytes).
func clipReason(s string) string { return clip.To(s, 123) }

// share is one browser's use of this node.
type share struct {
	sockets int
	opens   *rate.Limiter // new sessions
	// refunded: new sessions taken from opens whose open failed, given
	// back (a rate.Limiter takes back no token once its time has come).
	refunded int
}

// admitSocket counts a socket of browser, or refuses it past MaxSockets.
func (s *Server) admitSocket(browser string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shareOf(browser)
	if s.opts.MaxSockets > 0 && sh.sockets >= s.opts.MaxSockets {
		return false
	}
	sh.sockets++
	return true
}

// socketClosed uncounts a socket admitSocket counted.
func (s *Server) socketClosed(browser string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.shares[browser]; sh != nil {
		sh.sockets--
	}
}

// allowNewSession takes one of browser's new sessions per minute, or says
// how long until one is free. refund gives it back, for an open that
// failed: a session refused (MaxLiveSessions, a failing store) is not one
// the browser opened, and its retry should not find the minute spent.
func (s *Server) allowNewSession(browser string) (refund func(), ok bool, wait time.Duration) {
	if s.opts.NewSessionsPerMinute <= 0 {
		return func() {}, true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shareOf(browser)
	refund = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// Its own share: one swept meanwhile had its full allowance.
		if s.shares[browser] == sh && sh.refunded < sh.opens.Burst() {
			sh.refunded++
		}
	}
	if sh.refunded > 0 {
		sh.refunded--
		return refund, true, 0
	}
	now := s.opts.Clock.Now()
	r := sh.opens.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, false, d
	}
	return refund, true, 0
}

// shareOf returns browser's share, made on first use; s.mu is held. Shares
// of browsers with no socket and a full allowance are dropped, at most once
// a minute, so the table holds only browsers that are active.
func (s *Server) shareOf(browser string) *share {
	now := s.opts.Clock.Now()
	if now.Sub(s.sharesSwept) > time.Minute {
		s.sharesSwept = now
		for id, sh := range s.shares {
			if sh.sockets == 0 && sh.opens.TokensAt(now) >= float64(sh.opens.Burst()) {
				delete(s.shares, id)
			}
		}
	}
	sh := s.shares[browser]
	if sh == nil {
		perMinute := max(s.opts.NewSessionsPerMinute, 1)
		sh = &share{opens: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
		s.shares[browser] = sh
	}
	return sh
}

// refusalLogBurst and refusalLogRate bound the log lines of refused
// requests: anyone may send them, without a cookie, as fast as the network
// goes, and the log would grow as fast. Past a burst of 20, a line a
// second, which says how many were left out before it.
const (
	refusalLogBurst = 20
	refusalLogRate  = 1 // a second
)

// logRefusal logs a refused request, unless refused requests are logged
// faster than refusalLogBurst and refusalLogRate allow; it counts those it
// leaves out.
func (s *Server) logRefusal(level slog.Level, msg string, args ...any) {
	if !s.refusalLog.AllowN(s.opts.Clock.Now(), 1) {
		s.refusalsUnlogged.Add(1)
		return
	}
	if n := s.refusalsUnlogged.Swap(0); n > 0 {
		args = append(args, "refusals not logged before this", n)
	}
	for i, a := range args {
		args[i] = clipLogged(a)
	}
	s.logger.Log(context.Background(), level, msg, args...)
}

// maxLoggedValue bounds a value in a refusal's log line: a header, a
// field or an error that quotes one is the sender's to make as long as a
// request may be, and anyone may send one.
const maxLoggedValue = 256

// clipLogged is a, a string or an error cut to maxLoggedValue bytes.
func clipLogged(a any) any {
	var s string
	switch v := a.(type) {
	case string:
		s = v
	case error:
		s = v.Error()
	default:
		return a
	}
	if len(s) <= maxLoggedValue {
		return a
	}
	return clip.Marked(s, maxLoggedValue, "...")
}

// unreadableEvery is how often one session's damaged journal is logged at
// ERROR; unreadableKept bounds the sessions remembered for it.
const (
	unreadableEvery = time.Hour
	unreadableKept  = 1024
)

// firstUnreadable reports whether session's unreadable journal has not been
// logged at ERROR in the last unreadableEvery, and notes that it is now.
func (s *Server) firstUnreadable(session string) bool {
	return s.sayEvery(&s.unreadable, session, unreadableEvery, unreadableKept)
}

// sayEvery reports whether a line about key is to be logged now: not
// within every since the last, which seen remembers. Past kept keys seen
// starts again, so a key may be said again early: better than a map that
// any number of keys could grow.
func (s *Server) sayEvery(seen *map[string]time.Time, key string, every time.Duration, kept int) bool {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := (*seen)[key]; ok && now.Sub(at) < every {
		return false
	}
	if *seen == nil || len(*seen) >= kept {
		*seen = map[string]time.Time{}
	}
	(*seen)[key] = now
	return true
}

// logLoadFailure logs a session the engine could not load, for a reason
// other than those a caller answers in its own words: at WARN when the
// store is unavailable (its own trouble, said where it fails: the store's
// health, its appends; the page or front end is told to try again), at
// ERROR otherwise.
func logLoadFailure(logger *slog.Logger, session string, err error) {
	if errors.Is(err, engine.ErrStoreUnavailable) {
		logger.Warn("the store could not load a session", "session", session, "err", err)
		return
	}
	logger.Error("failed to load a session", "session", session, "err", err)
}

// warnWide says at WARN, as the gateway starts, what lets every site in:
// an origin pattern whose host matches every name, "*" and those that say
// it otherwise ("https://*", "*.*", "*:5173"), which let in the pages of
// every site (of a scheme, on a port) and, as the Host check answers an
// origin pattern's host, every Host; and a Hosts "*". Only "*" was said.
func warnWide(opts Options) {
	for _, p := range opts.OriginPatterns {
		if ok, _ := path.Match(strings.ToLower(originHost(p)), "unrelated-site.example"); ok {
			opts.Logger.Warn("an origin pattern (--origins) lets the pages of sites of every name use this gateway, with its browsers' cookies, and every Host is answered: never in production", "pattern", p)
		}
	}
	if slices.Contains(opts.Hosts, "*") {
		opts.Logger.Warn(`--hosts "*": the gateway answers to any Host name, which lets any site reach it by a name of its own (DNS rebinding): only behind a proxy that checks the Host`)
	}
}
