package agui

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecode: whatever a browser posts, decode answers a RunAgentInput it
// checked or an error, and what the handler reads of one it took (the
// messages' text, the seq of the last message the gateway minted, a tool
// message's result) is there and sane.
func FuzzDecode(f *testing.F) {
	for _, body := range []string{
		`{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[{"name":"confirm"}]}`,
		`{"threadId":"t1","runId":"r2","messages":[{"id":"gw7","role":"assistant","content":"x","toolCalls":[{"id":"call_1"}]},{"id":"gw9r","role":"tool","toolCallId":"call_1","content":"{\"ok\":true}"}]}`,
		`{"threadId":"t1","messages":[{"id":"gw99999999999999999999","role":"tool","toolCallId":"c","content":[{"type":"text","text":"a"}],"error":"no"}]}`,
		`{"threadId":"","messages":[]}`, `{"threadId":"t","messages":[{"id":"gw-1r"}]}`,
		`[]`, `null`, ``,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/ag-ui", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		in, err := decode(r)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("decode(%q): an error that says nothing", body)
			}
			return
		}
		if in.ThreadID == "" {
			t.Fatalf("decode(%q) took a run with no thread", body)
		}
		// lastSeen is the seq of a message id of the gateway's form, or 0.
		if seq, text := lastSeen(in.Messages); seq != 0 {
			names := func(m message) bool {
				rest, ok := strings.CutPrefix(m.ID, idPrefix)
				num, result := strings.CutSuffix(rest, "r")
				n, err := strconv.ParseInt(num, 10, 64)
				return ok && err == nil && n == seq && result != text
			}
			if seq < 0 || !slices.ContainsFunc(in.Messages, names) {
				t.Fatalf("lastSeen of %q is %d (text %v): no message id says so", body, seq, text)
			}
		}
		for _, m := range in.Messages {
			if res := resultJSON(m.text()); !json.Valid(res) {
				t.Fatalf("resultJSON(%q) = %s: not JSON", m.text(), res)
			}
		}
	})
}

// TestRunErrorCodesDocumented: integrations.md names every RUN_ERROR code
// the front end makes itself, as an app that switches on them reads it.
func TestRunErrorCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/integrations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{CodeSlow, CodeStopping, GuardPrefix + "<guard>"} {
		if !strings.Contains(string(doc), "`"+code+"`") {
			t.Errorf("docs/integrations.md does not name the RUN_ERROR code %q", code)
		}
	}
}
