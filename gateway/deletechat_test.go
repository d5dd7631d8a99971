package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/clienttools/gateway/gateway"
)

// del sends DELETE path with the browser's cookies and header; it returns
// the status and the body.
func (b *browser) del(path string, header http.Header) (int, string) {
	b.h.t.Helper()
	resp := b.request(http.MethodDelete, path, header)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// listed reports whether the browser's GET /sessions lists id.
func (b *browser) listed(id string) bool {
	b.h.t.Helper()
	resp := b.get("/sessions", nil)
	defer resp.Body.Close()
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		b.h.t.Fatalf("GET /sessions: %s: %v", resp.Status, err)
	}
	for _, s := range list.Sessions {
		if s.ID == id {
			return true
		}
	}
	return false
}

// TestDeleteChat: DELETE /sessions/{id} deletes the browser's chat: each
// of its open pages reads session.ended {reason: "deleted"}, the list no
// longer has it, and opening it again is unknown_session. Another
// browser's chat, or one already deleted, is 404 and kept; a page of a
// site --origins does not allow is refused before anything; one it allows
// may ask (its preflight names DELETE).
func TestDeleteChat(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{OriginPatterns: []string{"app.example"}}})
	alice, bob := h.newBrowser(nil), h.newBrowser(nil)
	tab, id := alice.open(nil)
	if got := tab.reply("hello"); got == "" {
		t.Fatal("no reply")
	}
	other := alice.dial(nil)
	other.send(map[string]any{"type": "session.open", "session": id, "after": 0})
	other.untilType("session.opened")

	if status, body := bob.del("/sessions/"+id, nil); status != http.StatusNotFound || !strings.Contains(body, "no chat") {
		t.Errorf("another browser's DELETE: %d %q, want 404", status, body)
	}
	if status, body := alice.del("/sessions/"+id, http.Header{"Origin": {"https://evil.example"}}); status != http.StatusForbidden || !strings.Contains(body, "evil.example") {
		t.Errorf("DELETE from another site: %d %q, want 403 naming it", status, body)
	}
	if !alice.listed(id) {
		t.Fatal("a refused DELETE deleted the chat")
	}

	preflight, _ := http.NewRequest(http.MethodOptions, h.srv.URL+"/sessions/"+id, nil)
	preflight.Header.Set("Origin", "https://app.example")
	preflight.Header.Set("Access-Control-Request-Method", "DELETE")
	resp, err := http.DefaultClient.Do(preflight)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "DELETE") ||
		resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("the preflight of an allowed site: %s %v", resp.Status, resp.Header)
	}

	if status, body := alice.del("/sessions/"+id, http.Header{"Origin": {"https://app.example"}}); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %q, want 204", status, body)
	}
	for _, page := range []*wsClient{tab, other} {
		ended := page.untilType("session.ended")
		if !strings.Contains(ended.String(), `"reason":"deleted"`) {
			t.Errorf("session.ended = %s, want reason deleted", ended)
		}
	}
	if alice.listed(id) {
		t.Error("the deleted chat is listed")
	}
	again := alice.dial(nil)
	again.send(map[string]any{"type": "session.open", "session": id, "after": 0})
	if f := again.untilError(); f.Code != "unknown_session" {
		t.Errorf("opening the deleted chat: %s, want unknown_session", f)
	}
	if status, _ := alice.del("/sessions/"+id, nil); status != http.StatusNotFound {
		t.Errorf("a second DELETE: %d, want 404", status)
	}
	if status, body := alice.del("/sessions/no.such*id", nil); status != http.StatusNotFound {
		t.Errorf("DELETE of an id no session can have: %d %q, want 404", status, body)
	}
}
