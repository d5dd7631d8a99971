package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/static"
	"github.com/clienttools/gateway/web"
)

// TestChatPageUnderAPrefix: a program that mounts the gateway under a path
// (http.StripPrefix("/chat", ...)) serves the chat page there too, with
// PageProps.Base: every file the page loads, the list of chats and the
// socket are under the prefix. The page loaded nothing there before: its
// files and its list were at /static/ and /sessions only.
func TestChatPageUnderAPrefix(t *testing.T) {
	chatPage, err := web.Handler(web.PageProps{AssetVersion: static.Version(), Base: "/chat"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{gateway: gateway.Options{
		Page:   chatPage,
		Static: static.FS,
	}})
	mux := http.NewServeMux()
	mux.Handle("/chat/", http.StripPrefix("/chat", h.gw.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := srv.Client()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, page := get("/chat/")
	if code != http.StatusOK {
		t.Fatalf("GET /chat/ = %d", code)
	}
	urls := regexp.MustCompile(`(?:src|href)="([^"]+)"|"(/[^"]*\.js[^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(urls) < 5 {
		t.Fatalf("the page names %d files:\n%s", len(urls), page)
	}
	for _, m := range urls {
		u := m[1] + m[2]
		if strings.HasPrefix(u, "#") {
			continue // a link within the page (the skip link)
		}
		if !strings.HasPrefix(u, "/chat/") {
			t.Errorf("the page loads %s, outside /chat/", u)
			continue
		}
		if code, _ := get(u); code != http.StatusOK {
			t.Errorf("GET %s = %d", u, code)
		}
	}
	for _, attr := range []string{`data-socket="/chat/ws"`, `data-sessions="/chat/sessions"`} {
		if !strings.Contains(page, attr) {
			t.Errorf("the page lacks %s", attr)
		}
	}
	if code, body := get("/chat/sessions"); code != http.StatusOK || !strings.Contains(body, `"sessions"`) {
		t.Errorf("GET /chat/sessions = %d %s", code, body)
	}
}
