package aisdk

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzDecode: whatever a browser posts, decode answers a request it
// checked or an error, and what the handler reads of a request it took
// (the last message's text, its tool parts) is there.
func FuzzDecode(f *testing.F) {
	for _, body := range []string{
		`{"id":"c1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message"}`,
		`{"id":"c1","messages":[{"role":"assistant","parts":[{"type":"tool-confirm","toolCallId":"call_1","state":"output-available","output":{"ok":true}}],"metadata":{"gateway":{"session":"s","seq":7}}}]}`,
		`{"id":"c1","messages":[{"role":"assistant","parts":[{"type":"dynamic-tool","toolCallId":"call_1","state":"output-error","errorText":"no"}]}]}`,
		`{"id":"","messages":[]}`,
		`{"id":"c1","messages":[{"role":"user","parts":[{"type":"text","text":"  "}]}]}`,
		`{"id":"c1","messages":[{"role":"system"}],"trigger":"regenerate-message"}`,
		`[]`, `null`, `{"id":1}`, ``,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/api/chat", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		req, err := decode(r)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("decode(%q): an error that says nothing", body)
			}
			return
		}
		if req.ID == "" || len(req.ID) > MaxChatIDBytes || len(req.Messages) == 0 {
			t.Fatalf("decode(%q) took %+v", body, req)
		}
		last := req.Messages[len(req.Messages)-1]
		switch last.Role {
		case "user":
			if strings.TrimSpace(text(last)) == "" {
				t.Fatalf("decode(%q) took a user message with no text", body)
			}
		case "assistant":
		default:
			t.Fatalf("decode(%q) took a last message of role %q", body, last.Role)
		}
	})
}
