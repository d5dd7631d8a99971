package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/alexedwards/scs/v2/memstore"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
)

// TestIdentifyOwnsTheChats: with Options.Identify, the app's login says
// who the browser is, not the gateway's cookie. A person's chats are
// theirs on each of their browsers, and not the next person's on a shared
// one; a request Identify refuses is answered 401 (503 while the store
// that knows the people is down) and opens nothing; no identity cookie is
// set.
func TestIdentifyOwnsTheChats(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Identify: func(r *http.Request) (string, error) {
		switch user := r.Header.Get("X-User"); user {
		case "down":
			return "", fmt.Errorf("the login store: %w", engine.ErrStoreUnavailable)
		case "bad":
			return "", errors.New("a login token that does not verify")
		case "long":
			return strings.Repeat("x", 513), nil
		default:
			return user, nil
		}
	}}})
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	as := func(user string, jar http.CookieJar) *browser {
		return &browser{h: h, client: &http.Client{Jar: jar, Transport: &userHeader{user: user, next: transport}}}
	}
	shared, _ := cookiejar.New(nil)
	other, _ := cookiejar.New(nil)

	alice := as("alice", shared)
	c, id := alice.open(pageTools)
	c.say("hello")
	c.idleReply()

	list := func(b *browser) []string {
		t.Helper()
		resp, err := b.client.Get(h.srv.URL + "/sessions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Sessions []struct{ ID string } }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET /sessions = %s: %v", resp.Status, err)
		}
		var ids []string
		for _, s := range body.Sessions {
			ids = append(ids, s.ID)
		}
		return ids
	}
	if got := list(as("alice", other)); len(got) != 1 || got[0] != id {
		t.Errorf("alice on her other browser lists %v, want her chat %s", got, id)
	}
	resumed := as("alice", other).dial(nil)
	resumed.send(map[string]any{"type": "session.open", "session": id})
	if f := resumed.untilType("session.opened"); f.Session != id {
		t.Errorf("alice on her other browser opened %s, want %s", f.raw, id)
	}

	bob := as("bob", shared)
	if got := list(bob); len(got) != 0 {
		t.Errorf("bob on alice's browser lists %v, want none of hers", got)
	}
	b := bob.dial(nil)
	b.send(map[string]any{"type": "session.open", "session": id})
	if f := b.untilError(); f.Code != "unknown_session" {
		t.Errorf("bob resuming alice's chat on her browser: %s, want unknown_session", f.raw)
	}

	for _, tc := range []struct {
		user string
		want int
	}{{"bad", http.StatusUnauthorized}, {"", http.StatusUnauthorized}, {"long", http.StatusUnauthorized}, {"down", http.StatusServiceUnavailable}} {
		for _, path := range []string{"/", "/sessions", "/ws"} {
			resp, err := as(tc.user, other).client.Get(h.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s as %q = %s, want %d", path, tc.user, resp.Status, tc.want)
			}
			if strings.HasSuffix(string(body), "\n") {
				t.Errorf("GET %s as %q: the refusal %q ends with a newline, which a front end's client shows", path, tc.user, body)
			}
		}
		if _, resp, err := as(tc.user, other).dialErr(nil); err == nil || resp == nil || resp.StatusCode != tc.want {
			t.Errorf("a WebSocket as %q: %v, want refused with %d", tc.user, err, tc.want)
		}
	}

	u, _ := http.NewRequest(http.MethodGet, h.srv.URL, nil)
	for _, jar := range []http.CookieJar{shared, other} {
		if cookies := jar.Cookies(u.URL); len(cookies) != 0 {
			t.Errorf("the gateway set cookies %v; with Identify it sets none", cookies)
		}
	}
	if !strings.Contains(h.logs.String(), "a login token that does not verify") {
		t.Errorf("the log does not say why a request was refused:\n%s", h.logs.String())
	}
}

// userHeader is a browser behind the app's login: each request carries its
// user, as a proxy that checked the login would set it.
type userHeader struct {
	user string
	next http.RoundTripper
}

func (u *userHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if u.user != "" {
		r.Header.Set("X-User", u.user)
	}
	return u.next.RoundTrip(r)
}

// TestCookiesKeptByTheEnginesStore: a gateway given no CookieStore keeps
// the browsers' identities where the engine keeps its sessions, when that
// store keeps them (the JetStream store does): an embedder that left it
// out lost every browser's chats at a restart.
func TestCookiesKeptByTheEnginesStore(t *testing.T) {
	st := &storeWithCookies{MemoryStore: engine.NewMemoryStore(), cookies: &countingCookies{Store: memstore.NewWithCleanupInterval(0)}}
	h := newHarness(t, harnessOptions{engine: engine.Options{Store: st}})
	h.newBrowser(nil) // GET /: a new identity
	if n := st.cookies.commits.Load(); n != 1 {
		t.Errorf("the engine's store kept %d identities, want the new browser's", n)
	}
}

type storeWithCookies struct {
	*engine.MemoryStore
	cookies *countingCookies
}

func (s *storeWithCookies) Cookies() scs.Store { return s.cookies }

type countingCookies struct {
	scs.Store
	commits atomic.Int64
}

func (c *countingCookies) Commit(token string, b []byte, expiry time.Time) error {
	c.commits.Add(1)
	return c.Store.Commit(token, b, expiry)
}

// TestUnknownIdentityCookieLogged: a browser whose identity cookie the
// store does not keep (expired, or the gateway runs on another data
// directory than the one that gave it) gets a new identity, and the log
// says so at WARN: that run replaces the browser's only key to its chats.
// A browser with no cookie is no news.
func TestUnknownIdentityCookieLogged(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	get := func(cookie *http.Cookie) *http.Response { return h.getWithCookie("/", cookie) }
	get(nil)
	if strings.Contains(h.logs.String(), "identity cookie is not one this store keeps") {
		t.Fatalf("a new browser was logged as one with an unknown identity:\n%s", h.logs.String())
	}
	resp := get(&http.Cookie{Name: "gateway_session", Value: "a-token-another-store-gave"})
	if len(resp.Cookies()) == 0 {
		t.Errorf("the browser got no new identity")
	}
	if !strings.Contains(h.logs.String(), "WARN a browser's identity cookie is not one this store keeps") {
		t.Errorf("no warning of the unknown identity:\n%s", h.logs.String())
	}
}
