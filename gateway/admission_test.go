package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/alexedwards/scs/v2/memstore"
	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// TestHostAllowList: the gateway answers IP addresses, localhost, its Hosts
// and its origins' hosts; any other Host is refused with 403 on the page and
// at the /ws upgrade (a page on a name that rebinds to 127.0.0.1 cannot
// drive it), with no cookie given. /healthz answers any Host.
func TestHostAllowList(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Hosts: []string{"chat.example.com"},
		OriginPatterns: []string{"*.trusted.example", "app.test:8443", "https://x.test"}}})
	port := h.srv.URL[strings.LastIndex(h.srv.URL, ":"):]
	tests := []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1" + port, true},
		{"[::1]" + port, true},
		{"localhost" + port, true},
		{"app.localhost", true},
		{"chat.example.com", true},
		{"CHAT.EXAMPLE.COM" + port, true},
		{"app.trusted.example", true},
		// Origin patterns with a port or a scheme name their host.
		{"app.test", true},
		{"app.test:8443", true},
		{"x.test", true},
		{"x.test" + port, true},
		{"https", false},
		{"evil.example", false},
		{"evil.example" + port, false},
		{"chat.example.com.evil.example", false},
	}
	client := &http.Client{}
	for _, tc := range tests {
		t.Run("host "+tc.host, func(t *testing.T) {
			for _, path := range []string{"/", "/sessions"} {
				req, _ := http.NewRequest("GET", h.srv.URL+path, nil)
				req.Host = tc.host
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := resp.StatusCode != http.StatusForbidden; got != tc.ok {
					t.Errorf("GET %s with Host %q: %s %s", path, tc.host, resp.Status, body)
				}
				if !tc.ok && (!strings.Contains(string(body), "--hosts") || len(resp.Header.Values("Set-Cookie")) > 0) {
					t.Errorf("refused GET %s: %q, Set-Cookie %q; want the text naming --hosts and no cookie", path, body, resp.Header.Values("Set-Cookie"))
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			ws, resp, err := websocket.Dial(ctx, h.wsURL(), &websocket.DialOptions{Host: tc.host})
			if tc.ok {
				if err != nil {
					t.Fatalf("upgrade with Host %q: %v", tc.host, err)
				}
				_ = ws.CloseNow()
				return
			}
			if err == nil {
				_ = ws.CloseNow()
				t.Fatalf("upgrade with Host %q succeeded; want 403", tc.host)
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden || len(resp.Header.Values("Set-Cookie")) > 0 {
				t.Errorf("upgrade with Host %q: %v; want 403 and no cookie", tc.host, resp)
			}
		})
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/healthz", nil)
	req.Host = "evil.example"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz with any Host: %s, want 200", resp.Status)
	}
}

// TestRefusalsLogBounded: requests refused for their Host, which anyone may
// send as fast as the network goes, log a burst of lines, not one each.
func TestRefusalsLogBounded(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Clock: clk}})
	refuse := func() {
		t.Helper()
		req, _ := http.NewRequest("GET", h.srv.URL+"/", nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET / with Host evil.example: %s, want 403", resp.Status)
		}
	}
	for range 100 {
		refuse()
	}
	if n := strings.Count(h.logs.String(), "request refused for its Host"); n != 20 {
		t.Errorf("100 refused requests at once logged %d lines, want a burst of 20", n)
	}
	// A second later, one more line, which counts those left out.
	clk.Advance(time.Second)
	refuse()
	if !strings.Contains(h.logs.String(), "refusals not logged before this=80") {
		t.Errorf("the line after the burst does not count the 80 left out:\n%s", h.logs.String())
	}
}

// TestRefusedOrigin: a /ws request refused for its Origin gives the
// browser no identity; a plain GET (not an upgrade) gets 403.
func TestRefusedOrigin(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	req, _ := http.NewRequest("GET", h.wsURL(), nil)
	req.URL.Scheme = "http"
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Header.Values("Set-Cookie")) > 0 {
		t.Errorf("GET /ws from another site: %s, cookies %q; want 403 and none", resp.Status, resp.Header.Values("Set-Cookie"))
	}
}

// TestBadPatterns: a Host or Origin pattern that is not one stops
// gateway.New with an error that names it, instead of refusing every page
// that should match it.
func TestBadPatterns(t *testing.T) {
	eng := newHarness(t, harnessOptions{}).eng
	for _, tc := range []struct {
		opts gateway.Options
		want string
	}{
		{gateway.Options{Hosts: []string{"chat.example.com", "[app"}}, `Options.Hosts: "[app"`},
		{gateway.Options{OriginPatterns: []string{"https://[app.example.com"}}, `Options.OriginPatterns: "https://[app.example.com"`},
	} {
		tc.opts.Engine = eng
		_, err := gateway.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want an error naming %s", tc.opts.Hosts, tc.opts.OriginPatterns, err, tc.want)
		}
	}
}

// TestSocketsPerBrowser: past MaxSockets, one browser's next socket is
// closed at once with 4002 and a reason; closing one makes room. Another
// browser is not affected.
func TestSocketsPerBrowser(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{MaxSockets: 3}})
	b := h.newBrowser(nil)
	var open []*wsClient
	for range 3 {
		c, _ := b.open(pageTools)
		open = append(open, c)
	}
	extra := b.dial(nil)
	_, err := extra.read()
	if websocket.CloseStatus(err) != websocket.StatusCode(engine.CloseTooMany) || !strings.Contains(err.Error(), "3 sockets open") {
		t.Fatalf("the fourth socket read %v, want close 4002 naming the limit", err)
	}
	other, _ := h.newBrowser(nil).open(pageTools)
	if got := other.reply("hello"); got != "echo: hello" {
		t.Errorf("another browser: reply %q", got)
	}
	_ = open[0].ws.Close(websocket.StatusNormalClosure, "")
	// The server counts the socket out once its handler returns.
	waitFor(t, "room for a socket", func() bool {
		c, _, err := b.dialErr(nil)
		if err != nil {
			return false
		}
		c.send(map[string]any{"type": "session.open", "tools": pageTools})
		f, err := c.read()
		_ = c.ws.CloseNow()
		return err == nil && f.Type == "session.opened"
	})
}

// TestNewSessionsPerMinute: past NewSessionsPerMinute, a browser's next new
// session is refused with rate_limited, saying when to try again; resuming
// the sessions it has still works, and so does another browser.
func TestNewSessionsPerMinute(t *testing.T) {
	clk := clock.NewFake(time.Now()) // the cookie's expiry is on it too: a browser's jar keeps it
	h := newHarness(t, harnessOptions{gateway: gateway.Options{NewSessionsPerMinute: 3, Clock: clk}})
	b := h.newBrowser(nil)
	var ids []string
	for range 3 {
		c, id := b.open(pageTools)
		ids = append(ids, id)
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
	c := b.dial(nil)
	c.send(map[string]any{"type": "session.open", "tools": pageTools})
	if f := c.untilError(); f.Code != string(engine.WireRateLimited) || !strings.Contains(f.errorText(), "try again in") {
		t.Fatalf("the fourth new session: %s, want rate_limited saying when", f.raw)
	}
	c.send(map[string]any{"type": "session.open", "session": ids[0], "after": 0, "tools": pageTools})
	c.untilType("session.opened")
	if got := c.reply("hello"); got != "echo: hello" {
		t.Errorf("resumed session: reply %q", got)
	}
	h.newBrowser(nil).open(pageTools)
	// One comes back every 20 s, on the gateway's clock.
	clk.Advance(20 * time.Second)
	c2 := b.dial(nil)
	c2.send(map[string]any{"type": "session.open", "tools": pageTools})
	c2.untilType("session.opened")
}

// TestLiveSessionsPerBrowser: a browser with MaxLiveSessions sessions in
// memory is refused another (limit_exceeded), whatever its rate.
func TestLiveSessionsPerBrowser(t *testing.T) {
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{MaxLiveSessions: 2},
		gateway: gateway.Options{NewSessionsPerMinute: -1},
	})
	b := h.newBrowser(nil)
	b.open(pageTools)
	b.open(pageTools)
	c := b.dial(nil)
	c.send(map[string]any{"type": "session.open", "tools": pageTools})
	if f := c.untilError(); f.Code != string(engine.WireLimitExceeded) || !strings.Contains(f.errorText(), "2 sessions in memory here, and opens a new one only with fewer than 2") {
		t.Fatalf("the third session: %s, want limit_exceeded naming 2", f.raw)
	}
	if n := h.eng.Loaded(); n != 2 {
		t.Errorf("%d sessions loaded, want 2", n)
	}
	h.newBrowser(nil).open(pageTools)
}

// TestRefusedSessionsAreNotCounted: a new session refused (here for
// MaxLiveSessions) is not one of the browser's NewSessionsPerMinute: its
// retries are refused for what refused it, not rate_limited "this
// browser opened 3 sessions" (an outside audit: it had opened 2).
func TestRefusedSessionsAreNotCounted(t *testing.T) {
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{MaxLiveSessions: 2},
		gateway: gateway.Options{NewSessionsPerMinute: 3},
	})
	b := h.newBrowser(nil)
	b.open(pageTools)
	b.open(pageTools)
	c := b.dial(nil)
	for i := range 3 {
		c.send(map[string]any{"type": "session.open", "tools": pageTools})
		if f := c.untilError(); f.Code != string(engine.WireLimitExceeded) {
			t.Fatalf("new session %d past the live ones: %s, want limit_exceeded", i+3, f.raw)
		}
	}
}

// TestLiveSessionsWhenGoingBack: going back to a chat that left memory
// counts against MaxLiveSessions too: with two chats in memory, each with
// its page, a third is refused (limit_exceeded); once one of them left,
// it opens. A browser held every chat it had. (Which chat leaves to make
// room, and when, is the engine's: TestLoadForKeepsTheOwnersShare.)
func TestLiveSessionsWhenGoingBack(t *testing.T) {
	h := newHarness(t, harnessOptions{
		engine:  engine.Options{MaxLiveSessions: 2, Unload: 100 * time.Millisecond},
		gateway: gateway.Options{NewSessionsPerMinute: -1},
	})
	b := h.newBrowser(nil)
	first, old := b.open(pageTools)
	_ = first.ws.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the first chat's unload", func() bool { _, in := h.eng.Session(old); return !in })
	b.open(pageTools)
	third, _ := b.open(pageTools)
	back := b.dial(nil)
	back.send(map[string]any{"type": "session.open", "session": old, "tools": pageTools})
	if f := back.untilError(); f.Code != string(engine.WireLimitExceeded) || !strings.Contains(f.errorText(), "goes back to a chat only with fewer than 2") {
		t.Fatalf("going back with two chats in memory, each with a page: %s, want limit_exceeded", f.raw)
	}
	_ = third.ws.Close(websocket.StatusNormalClosure, "")
	// As the SDK does, the page tries again until there is room.
	deadline := time.Now().Add(hang)
	for {
		again := b.dial(nil)
		again.send(map[string]any{"type": "session.open", "session": old, "tools": pageTools})
		f := again.until("session.opened or an error", func(f frame) bool { return f.Type == "session.opened" || f.Type == "error" })
		if f.Type == "session.opened" && f.Session == old {
			break
		}
		if f.Code != string(engine.WireLimitExceeded) || time.Now().After(deadline) {
			t.Fatalf("going back once a chat left: %s", f.raw)
		}
		_ = again.ws.Close(websocket.StatusNormalClosure, "")
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.eng.Loaded(); n > 2 {
		t.Errorf("%d sessions in memory, want 2 at most", n)
	}
}

// waitFor polls ok until it holds, failing the test after hang.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, hang)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCrossSitePage: a chat page on another site needs the identity cookie
// on its /ws (SameSite None, which browsers take only with Secure) and the
// SDK's modules with CORS.
func TestCrossSitePage(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{
		CookieSameSite: http.SameSiteNoneMode,
		Static:         fstest.MapFS{"gateway.js": {Data: []byte("export const x = 1;")}},
	}})
	resp, err := http.Get(h.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookie := strings.Join(resp.Header.Values("Set-Cookie"), "; ")
	if !strings.Contains(cookie, "SameSite=None") || !strings.Contains(cookie, "Secure") {
		t.Errorf("Set-Cookie %q, want SameSite=None and Secure", cookie)
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/static/gateway.js", nil)
	req.Header.Set("Origin", "https://app.example.com")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET /static/gateway.js from another origin: %s, Access-Control-Allow-Origin %q", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestIdentityAfterAShorterLifetime: a gateway whose identities live less
// long than the one before it (--retain made shorter) writes an identity
// made under the longer lifetime again at its next visit: the store forgets
// an entry its lifetime after it was written, and a browser that came every
// day would lose its chats.
func TestIdentityAfterAShorterLifetime(t *testing.T) {
	eng := newHarness(t, harnessOptions{}).eng
	cookies := memstore.New() // its cleanup goroutine outlives the test (TestMain)
	serve := func(lifetime time.Duration) string {
		gw, err := gateway.New(gateway.Options{Engine: eng, CookieStore: cookies, CookieLifetime: lifetime, PingInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	visit := func(base string, sent *http.Cookie) *http.Cookie {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/sessions", nil)
		if sent != nil {
			req.AddCookie(&http.Cookie{Name: sent.Name, Value: sent.Value})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "gateway_session" {
				return c
			}
		}
		return nil
	}
	long, short := serve(30*24*time.Hour), serve(7*24*time.Hour)
	first := visit(long, nil)
	if first == nil || first.MaxAge != 30*24*3600 {
		t.Fatalf("the first visit gave %v, want an identity for 30 days", first)
	}
	if got := visit(long, first); got != nil {
		t.Errorf("a visit under the same lifetime rewrote the identity at once: %v", got)
	}
	got := visit(short, first)
	if got == nil || got.Value != first.Value || got.MaxAge != 7*24*3600 {
		t.Errorf("the first visit under a 7-day lifetime gave %v, want the same token for 7 days", got)
	}
}

// TestPageAndFileHeaders: the chat page may be framed by itself only (a
// click on Approve cannot be steered from another site), files are not
// sniffed as another type, and /static/ lists no folder.
func TestPageAndFileHeaders(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Static: fstest.MapFS{
		"gateway.js":       {Data: []byte("export const x = 1;")},
		"vendor/marked.js": {Data: []byte("export const y = 2;")},
	}}})
	for _, tc := range []struct {
		path   string
		status int
		header map[string]string
	}{
		{"/", http.StatusOK, map[string]string{"Content-Security-Policy": "frame-ancestors 'self'", "X-Content-Type-Options": "nosniff"}},
		{"/static/gateway.js", http.StatusOK, map[string]string{"X-Content-Type-Options": "nosniff"}},
		{"/static/", http.StatusNotFound, nil},
		{"/static/vendor/", http.StatusNotFound, nil},
		{"/static/vendor", http.StatusNotFound, nil},
	} {
		resp, err := http.Get(h.srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %s, want %d", tc.path, resp.Status, tc.status)
		}
		for k, v := range tc.header {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", tc.path, k, got, v)
			}
		}
	}
}

// TestIdentityLivesAfterTheLastVisit: a browser's identity lives 24 h after
// its last visit, not its first: a visit an hour or more after the last
// renewal gets the same token with a new expiry (GET /, GET /sessions and
// the /ws upgrade alike), and the browser keeps its chats; a visit sooner
// writes nothing.
func TestIdentityLivesAfterTheLastVisit(t *testing.T) {
	start := time.Now()
	fake := clock.NewFake(start)
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Clock: fake}})
	visit := func(path string, cookie *http.Cookie) *http.Response {
		t.Helper()
		resp := h.getWithCookie(path, cookie)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return resp
	}
	identity := func(resp *http.Response) *http.Cookie {
		for _, c := range resp.Cookies() {
			if c.Name == "gateway_session" {
				return c
			}
		}
		return nil
	}
	first := identity(visit("/", nil))
	if first == nil {
		t.Fatal("GET / gave no identity cookie")
	}
	c, _, err := websocket.Dial(context.Background(), h.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {first.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	page := &wsClient{t: t, ws: c}
	t.Cleanup(func() { _ = c.CloseNow() })
	page.send(map[string]any{"type": "session.open"})
	session := page.untilType("session.opened").Session

	fake.Advance(30 * time.Minute)
	if got := identity(visit("/", first)); got != nil {
		t.Errorf("a visit 30 min after the identity was made rewrote it: %v", got)
	}
	steps := []struct {
		path string
		at   time.Duration // since start
	}{{"/", 2 * time.Hour}, {"/sessions", 5 * time.Hour}, {"/ws", 30 * time.Hour}, {"/", 52 * time.Hour}}
	for _, step := range steps {
		fake.Advance(start.Add(step.at).Sub(fake.Now()))
		var resp *http.Response
		if step.path == "/ws" {
			ws, r, err := websocket.Dial(context.Background(), h.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {first.String()}}})
			if err != nil {
				t.Fatal(err)
			}
			_ = ws.CloseNow()
			resp = r
		} else {
			resp = visit(step.path, first)
		}
		got := identity(resp)
		if got == nil {
			t.Fatalf("GET %s %v after the first visit gave no renewed cookie", step.path, step.at)
		}
		if got.Value != first.Value {
			t.Errorf("GET %s renewed the identity with another token: the browser would lose its chats", step.path)
		}
		want := fake.Now().Add(gateway.CookieLifetime)
		if d := got.Expires.Sub(want); d < -time.Second || d > time.Second {
			t.Errorf("GET %s %v after the first visit: cookie expires %v, want %v (24 h after this visit)", step.path, step.at, got.Expires, want)
		}
	}
	list, err := http.NewRequest("GET", h.srv.URL+"/sessions", nil)
	if err != nil {
		t.Fatal(err)
	}
	list.AddCookie(first)
	resp, err := http.DefaultClient.Do(list)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), session) {
		t.Errorf("GET /sessions 52 h after the first visit: %s, want the chat %s", body, session)
	}
}

// downCookies is a cookie store whose server does not answer (NATS
// without its quorum).
type downCookies struct{}

var errNoStream = fmt.Errorf("%w: nats: no response from stream", engine.ErrStoreUnavailable)

func (downCookies) Find(string) ([]byte, bool, error)      { return nil, false, errNoStream }
func (downCookies) Commit(string, []byte, time.Time) error { return errNoStream }
func (downCookies) Delete(string) error                    { return errNoStream }

// damagedCookies keeps every identity as bytes that do not decode.
type damagedCookies struct{}

func (damagedCookies) Find(string) ([]byte, bool, error)      { return []byte("not an identity"), true, nil }
func (damagedCookies) Commit(string, []byte, time.Time) error { return nil }
func (damagedCookies) Delete(string) error                    { return nil }

// TestIdentityStoreDown: a browser whose identity the store cannot read or
// make is told the gateway is unavailable for now (503, Retry-After), as
// for any refusal it should try again after, not that it failed (500).
//
// An identity the store keeps that does not read back is no outage: the
// browser would be told to come back for ever, and is told it failed.
func TestIdentityStoreDown(t *testing.T) {
	eng := newHarness(t, harnessOptions{}).eng
	for _, tc := range []struct {
		store      scs.Store
		status     int
		retryAfter bool
	}{
		{downCookies{}, http.StatusServiceUnavailable, true},
		{damagedCookies{}, http.StatusInternalServerError, false},
	} {
		gw, err := gateway.New(gateway.Options{Engine: eng, CookieStore: tc.store, PingInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		for _, path := range []string{"/", "/sessions"} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			req.AddCookie(&http.Cookie{Name: "gateway_session", Value: "a-token-the-store-cannot-read"})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
				t.Errorf("GET %s with %T: %d, Retry-After %q, %q; want %d, a Retry-After %v", path, tc.store, resp.StatusCode, resp.Header.Get("Retry-After"), body, tc.status, tc.retryAfter)
			}
			if tc.retryAfter && !strings.Contains(string(body), "store is unavailable") {
				t.Errorf("GET %s with the identities' store down: %q, want the store named", path, body)
			}
		}
	}
}

// TestFrontEndRefusalsLogBounded: a front end's refused requests, which
// anyone may send without a cookie, log as /ws's refused upgrades do: a
// burst, then a line a second, each value cut short. A trigger of 8 MB was
// quoted whole, in the answer and in a log line each.
func TestFrontEndRefusalsLogBounded(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Clock: clk}})
	big := strings.Repeat("x", 64<<10) // far past a quote, and 30 of them parse quickly under -race
	for range 30 {
		b := h.newBrowser(nil)
		req := userMessage("chat-a", "hi")
		req["trigger"] = big
		resp := b.post(gateway.RouteAISDK, req, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(body) > 1024 || !strings.Contains(string(body), "trigger") {
			t.Fatalf("a refused trigger: %s, %d bytes: %.200s", resp.Status, len(body), body)
		}
	}
	logged := h.logs.String()
	if n := strings.Count(logged, "AI SDK request refused"); n != 20 {
		t.Errorf("30 refused requests at once logged %d lines, want a burst of 20", n)
	}
	for line := range strings.Lines(logged) {
		if len(line) > 2048 {
			t.Errorf("a log line of %d bytes: %.200s...", len(line), line)
		}
	}
}

// TestSecureIdentityCookie: a Secure identity cookie is named
// __Host-gateway_session, which no other site may set: under the plain
// name, a page of a sibling subdomain set one for the whole domain, the
// requests carried it first, and the victim chatted as the attacker, who
// read those chats. A browser that kept its identity under the plain name
// (the gateway was not Secure before) keeps it under the new one, unless
// it holds two of them.
func TestSecureIdentityCookie(t *testing.T) {
	eng := newHarness(t, harnessOptions{}).eng
	cookies := memstore.New() // its cleanup goroutine outlives the test (TestMain)
	clk := clock.NewFake(time.Now())
	serve := func(secure bool) string {
		gw, err := gateway.New(gateway.Options{Engine: eng, CookieStore: cookies, CookieSecure: secure, PingInterval: -1, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	do := func(req *http.Request, sent []*http.Cookie) (set map[string]*http.Cookie, body string) {
		t.Helper()
		for _, c := range sent {
			req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		set = map[string]*http.Cookie{}
		for _, c := range resp.Cookies() {
			set[c.Name] = c
		}
		return set, string(b)
	}
	list := func(base string, sent ...*http.Cookie) (map[string]*http.Cookie, string) {
		req, _ := http.NewRequest("GET", base+"/sessions", nil)
		return do(req, sent)
	}
	plain, secure := serve(false), serve(true)

	set, _ := list(plain)
	legacy := set[gateway.CookieName]
	if legacy == nil {
		t.Fatal("the plain gateway set no identity")
	}
	body, _ := json.Marshal(userMessage("chat-a", "kept chat"))
	req, _ := http.NewRequest("POST", plain+gateway.RouteAISDK, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	do(req, []*http.Cookie{legacy})

	set, listed := list(secure, legacy)
	moved := set[gateway.SecureCookieName]
	switch {
	case moved == nil || !moved.Secure || moved.Path != "/" || moved.Domain != "":
		t.Fatalf("the identity under the plain name moved to %+v, want a Secure __Host- cookie for / and no domain", moved)
	case !strings.Contains(listed, "kept chat"):
		t.Errorf("the moved identity lists %s, want its chat", listed)
	case set[gateway.CookieName] == nil || set[gateway.CookieName].Value != moved.Value || !set[gateway.CookieName].Secure:
		// A node of the version before (a rolling deploy, a rollback)
		// reads it: the same identity, its chats listed.
		t.Errorf("the plain cookie beside the moved one: %+v, want the same token, Secure", set[gateway.CookieName])
	}
	if _, listed := list(plain, legacy); !strings.Contains(listed, "kept chat") {
		t.Errorf("the plain cookie, after the move, lists %s on the gateway before, want its chat", listed)
	}

	// A token given under __Host- (an attacker's, here) that comes under
	// the plain name alone was put there by someone else: not taken.
	set, _ = list(secure)
	attacker := set[gateway.SecureCookieName]
	if plainToo := set[gateway.CookieName]; plainToo == nil || plainToo.Value != attacker.Value {
		t.Errorf("a new Secure identity's plain cookie, for the nodes before: %+v, want its token", plainToo)
	}
	body, _ = json.Marshal(userMessage("chat-b", "attacker chat"))
	req, _ = http.NewRequest("POST", secure+gateway.RouteAISDK, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	do(req, []*http.Cookie{attacker})
	tossed := func(token string) (given *http.Cookie, listed string) {
		set, listed := list(secure, &http.Cookie{Name: gateway.CookieName, Value: token})
		return set[gateway.SecureCookieName], listed
	}
	if given, listed := tossed(attacker.Value); given == nil || given.Value == attacker.Value || strings.Contains(listed, "chat") {
		t.Errorf("a __Host- token tossed under the plain name: lists %s, sets %+v; want a new identity, no chats", listed, given)
	}
	// A moved one comes under the plain name alone again for a while
	// (the browser's other tabs sent it before the move's answer), then
	// no more: it would be another site's.
	if given, listed := tossed(moved.Value); given == nil || given.Value != moved.Value || !strings.Contains(listed, "kept chat") {
		t.Errorf("the moved identity, again under the plain name just after: lists %s, sets %+v; want it kept", listed, given)
	}
	// An identity from before the switch that an attacker keeps alive
	// under __Host- (by hand) is marked so as well.
	set, _ = list(plain)
	kept := set[gateway.CookieName]
	list(secure, &http.Cookie{Name: gateway.SecureCookieName, Value: kept.Value})
	clk.Advance(11 * time.Minute)
	for _, token := range []string{moved.Value, kept.Value} {
		if given, listed := tossed(token); given == nil || given.Value == token || strings.Contains(listed, "chat") {
			t.Errorf("an identity seen under __Host-, under the plain name alone 11 minutes on: lists %s, sets %+v; want a new identity", listed, given)
		}
	}
}

// TestWideOriginsAreSaid: an origin pattern whose host matches every name
// is said at start as "*" is, however it is written: "https://*" and "*.*"
// let every site's pages in with the browsers' cookies, and "*:5173", whose
// host the Host check answers, every Host (DNS rebinding). Only "*" was,
// and by the command alone; a program that embeds the gateway heard nothing.
func TestWideOriginsAreSaid(t *testing.T) {
	const said = "an origin pattern (--origins) lets the pages of sites of every name use this gateway"
	for _, tc := range []struct {
		pattern string
		wide    bool
	}{
		{"*", true}, {"https://*", true}, {"*.*", true}, {"*:5173", true}, {"HTTP://*:8080", true},
		{"app.example.com", false}, {"*.example.com", false}, {"https://*.example.com", false}, {"localhost:5173", false}, {"*.localhost", false},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{tc.pattern}}})
			if got := strings.Contains(h.logs.String(), "WARN "+said); got != tc.wide {
				t.Errorf("said at start: %v, want %v:\n%s", got, tc.wide, h.logs.String())
			}
		})
	}
}
