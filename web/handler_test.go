package web

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a-h/templ"
)

// TestHandlerPolicy: the page is served under a policy that allows its
// import map by the hash of exactly the text the browser hashes (a map
// changed by AssetVersion or Base gets its own), and its socket's origin
// when SocketPath names another; the body is the page.
func TestHandlerPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   PageProps
		connect string
	}{
		{"versioned", PageProps{AssetVersion: "abc"}, "connect-src 'self';"},
		{"under a prefix", PageProps{AssetVersion: "abc", Base: "/chat"}, "connect-src 'self';"},
		{"no import map", PageProps{}, "connect-src 'self';"},
		{"a socket elsewhere", PageProps{AssetVersion: "abc", SocketPath: "wss://gw.example.com/ws"}, "connect-src 'self' wss://gw.example.com;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Handler(tc.props)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			page, policy := rec.Body.String(), rec.Header().Get("Content-Security-Policy")
			if page != render(t, tc.props) {
				t.Errorf("the body is not the page")
			}
			scripts := "script-src 'self'"
			if start := strings.Index(page, `<script type="importmap">`); start >= 0 {
				text := page[start+len(`<script type="importmap">`):]
				text = text[:strings.Index(text, "</script>")]
				sum := sha256.Sum256([]byte(text))
				scripts += " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
			} else if tc.props.AssetVersion != "" {
				t.Fatalf("a versioned page has no import map:\n%s", page)
			}
			for _, want := range []string{"default-src 'self'", scripts + ";", tc.connect, "object-src 'none'", "base-uri 'none'", "frame-ancestors 'self'"} {
				if !strings.Contains(policy+";", want) {
					t.Errorf("the policy %q does not say %q", policy, want)
				}
			}
		})
	}
}

// BenchmarkPage: GET / as Handler serves it (rendered once) and as
// templ.Handler renders it at each request.
func BenchmarkPage(b *testing.B) {
	once, err := Handler(PageProps{AssetVersion: "abc"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"rendered-once", once}, {"templ", templ.Handler(ChatPage(PageProps{AssetVersion: "abc"}))}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
