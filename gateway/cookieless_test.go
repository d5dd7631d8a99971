package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/gateway"
)

// TestCookielessResumeSaysWhy: a page whose browser does not send the
// identity cookie (another site's page; localhost against 127.0.0.1) is a
// new browser at each connection, and its reconnect hears unknown_session
// for its own chat. The refusal says the connection came with no cookie,
// and the log says it once for the page's origin; a browser with its
// cookie that names a session it does not have hears no such thing.
func TestCookielessResumeSaysWhy(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"localhost:5173"}}})
	withCookie := h.newBrowser(nil)
	_, id := withCookie.open(pageTools)

	c := withCookie.dial(nil)
	c.send(map[string]any{"type": "session.open", "session": "nope"})
	if f := c.untilError(); f.Code != "unknown_session" || strings.Contains(string(f.Message), "no identity cookie") {
		t.Errorf("a browser with its cookie naming a session it does not have: %s; want unknown_session, with no word of a cookie", f.raw)
	}

	noCookie := &browser{h: h, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(noCookie.client.Transport.(*http.Transport).CloseIdleConnections)
	for try := range 3 {
		c := noCookie.dial(http.Header{"Origin": {"http://localhost:5173"}})
		c.send(map[string]any{"type": "session.open", "session": id})
		if f := c.untilError(); f.Code != "unknown_session" || !strings.Contains(string(f.Message), "no identity cookie") || !strings.Contains(string(f.Message), "another site") {
			t.Errorf("try %d, a resume with no cookie: %s; want unknown_session saying the connection came with no identity cookie", try+1, f.raw)
		}
	}
	if n := strings.Count(h.logs.String(), "no identity cookie"); n != 1 {
		t.Errorf("the log says it %d times over three tries, want once:\n%s", n, h.logs.String())
	}
	if !strings.Contains(h.logs.String(), "localhost:5173") {
		t.Errorf("the log does not name the page's origin:\n%s", h.logs.String())
	}

	// The origin check reads the host alone: a path, however long, is the
	// same origin, not a new line each (a client could fill the log).
	for _, path := range []string{"/a", "/b", "/" + strings.Repeat("x", 100_000)} {
		c := noCookie.dial(http.Header{"Origin": {"http://LOCALHOST:5173" + path}})
		c.send(map[string]any{"type": "session.open", "session": id})
		if f := c.untilError(); f.Code != "unknown_session" {
			t.Errorf("a resume with no cookie from %.40q: %s", path, f.raw)
		}
	}
	if n := strings.Count(h.logs.String(), "no identity cookie"); n != 1 || len(h.logs.String()) > 20_000 {
		t.Errorf("after paths on the same origin the log says it %d times in %d bytes, want once, short", n, len(h.logs.String()))
	}
}

// TestPlainCookieOverHTTPSIsSaid: a gateway whose identity cookie is not
// Secure, reached over HTTPS (a proxy's X-Forwarded-Proto, a page's
// Origin), says once at WARN to set --cookie-secure: without it a page of a
// sibling subdomain can give browsers an identity of its own and read their
// chats, and an outside audit's operator behind a TLS proxy heard nothing.
func TestPlainCookieOverHTTPSIsSaid(t *testing.T) {
	const said = "requests come over HTTPS, but the identity cookie is not Secure"
	// Sessions of one's own: what counts is a Secure cookie named __Host-.
	ownSessions := func(secure bool, name string) *scs.SessionManager {
		sm := scs.New()
		sm.Cookie.Secure, sm.Cookie.Name = secure, name
		return sm
	}
	proxied := func(string) http.Header { return http.Header{"X-Forwarded-Proto": {"https"}} }
	for _, tc := range []struct {
		name   string
		opts   gateway.Options
		header func(host string) http.Header
		want   int
		tls    bool // served over TLS by the gateway's own listener
	}{
		{"plain HTTP", gateway.Options{}, func(string) http.Header { return nil }, 0, false},
		{"over TLS", gateway.Options{}, func(string) http.Header { return nil }, 1, true},
		{"behind a TLS proxy", gateway.Options{}, proxied, 1, false},
		{"behind a proxy that says more than one", gateway.Options{}, func(string) http.Header { return http.Header{"X-Forwarded-Proto": {"HTTPS, http"}} }, 1, false},
		{"a page served over HTTPS", gateway.Options{}, func(host string) http.Header { return http.Header{"Origin": {"https://" + host}} }, 1, false},
		{"a Secure cookie behind a TLS proxy", gateway.Options{CookieSecure: true}, proxied, 0, false},
		{"Sessions of one's own, Secure and __Host-", gateway.Options{Sessions: ownSessions(true, "__Host-app")}, proxied, 0, false},
		{"Sessions of one's own, Secure under another name", gateway.Options{Sessions: ownSessions(true, "app")}, proxied, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{gateway: tc.opts})
			srv := h.srv
			if tc.tls {
				srv = httptest.NewTLSServer(h.gw.Handler())
				t.Cleanup(srv.Close)
			}
			for range 3 {
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/sessions", nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.header(srv.Listener.Addr().String()) {
					req.Header[k] = v
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET /sessions: %s", resp.Status)
				}
			}
			if n := strings.Count(h.logs.String(), said); n != tc.want || tc.want > 0 && !strings.Contains(h.logs.String(), "WARN "+said) {
				t.Errorf("the log says it %d times over three requests, want %d:\n%s", n, tc.want, h.logs.String())
			}
		})
	}
}
