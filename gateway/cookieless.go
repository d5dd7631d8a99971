package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clienttools/gateway/clip"
)

// A page whose browser does not send the identity cookie (a page on
// another site than the gateway's, in a browser that blocks third-party
// cookies; localhost against 127.0.0.1) is a new browser at each
// connection: every reconnect, not only every reload, starts a new chat.
// The gateway cannot tell such a page's first connection from a new
// browser's, but a resume on a connection without the cookie is one: its
// unknown_session says why, and the log says it once an hour an origin.

// cookielessEvery and cookielessKept bound the WARN lines: once an hour
// an origin, for at most as many origins at a time.
const (
	cookielessEvery = time.Hour
	cookielessKept  = 1000
)

// cookielessHint ends the unknown_session of a resume without the cookie.
const cookielessHint = "; this connection came with no identity cookie, so it is a new browser to the gateway: a page on another site than the gateway's (localhost and 127.0.0.1 are two) may not send it (docs/gateway.md, a chat page on another origin)"

// originOf is r's Origin as the log and the once-an-hour bound key it:
// scheme and host, lower-cased and cut short. The check of origins reads
// the host alone, so the header's path or its length must not make a new
// key (each would be a WARN line, and a string kept an hour).
func originOf(r *http.Request) string {
	raw := r.Header.Get("Origin")
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unreadable)"
	}
	return clip.Marked(strings.ToLower(u.Scheme+"://"+u.Host), maxLoggedValue, "...")
}

// cookielessResume is what a resume this page's browser cannot make adds
// to its unknown_session: the hint when the connection came without the
// cookie, logged once an hour for its origin; else nothing.
func (c *conn) cookielessResume() string {
	if !c.cookieless {
		return ""
	}
	if c.s.firstCookieless(c.origin) {
		c.logger.Warn("a page resumed a session on a connection with no identity cookie: its browser is new to the gateway at every connection, and each reconnect starts a new chat (a page on another site than the gateway's? docs/gateway.md)", "origin", c.origin)
	}
	return cookielessHint
}

// firstCookieless reports whether origin's cookieless resume is to be
// logged: not in the hour since it last was.
func (s *Server) firstCookieless(origin string) bool {
	return s.sayEvery(&s.cookieless, origin, cookielessEvery, cookielessKept)
}
