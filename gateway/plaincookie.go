package gateway

import (
	"net/http"
	"strings"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/clip"
)

// plainCookieOverHTTPS logs once, at WARN, that r came over HTTPS (TLS
// here, a proxy's X-Forwarded-Proto, a page's Origin) while the identity
// cookie is not a Secure one named __Host-: a page of a sibling subdomain
// may then set one of its own for the whole domain (cookie tossing), and
// the browser chats as that page's author, who reads it. Operators behind
// a TLS proxy, the usual way to serve it, missed the flag, and nothing said
// so.
func (s *Server) plainCookieOverHTTPS(r *http.Request, sm *scs.SessionManager) {
	if sm.Cookie.Secure && strings.HasPrefix(sm.Cookie.Name, "__Host-") {
		return
	}
	var how string
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	switch {
	case r.TLS != nil:
		how = "TLS"
	case strings.EqualFold(strings.TrimSpace(proto), "https"):
		how = "X-Forwarded-Proto: https"
	case strings.HasPrefix(r.Header.Get("Origin"), "https://"):
		how = "Origin " + clip.Marked(r.Header.Get("Origin"), 100, "…")
	default:
		return
	}
	if s.plainOverHTTPS.Swap(true) {
		return
	}
	s.logger.Warn("requests come over HTTPS, but the identity cookie is not Secure: set --cookie-secure (Options.CookieSecure; Options.Sessions of your own: a Secure cookie named __Host-…), or a page of another subdomain of the site can give browsers an identity of its own, and read their chats (docs/gateway.md)", "seen", how)
}
