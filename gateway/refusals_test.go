package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/metrics"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefusalsQuoteLittle: a refused frame's reply quotes only the start of
// what was refused. Replies wait in a queue of 64 for a page that may read
// nothing: each quoting a value of up to a frame's size, one socket held
// 64 of them, about 100 MiB.
func TestRefusalsQuoteLittle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := h.newBrowser(nil).open(pageTools)
	big := strings.Repeat("x", 200_000)
	tests := []struct {
		name, data, code, mention string
	}{
		{"unknown type", `{"type":"` + big + `"}`, "unknown_frame", `"` + big[:64] + `"...`},
		{"unknown call", `{"type":"tool.result","id":"` + big + `","attempt":1,"result":{}}`, "unknown_call", `"` + big[:64] + `"...`},
		{"a number past 64 bits", `{"type":"session.open","after":1` + strings.Repeat("0", 200_000) + `}`, "bad_frame", `"after" should be a whole number that fits in 64 bits, not 1` + strings.Repeat("0", 63) + "..."},
		{"a long message id", `{"type":"message","content":"hi","id":"` + big + `"}`, "bad_frame", `"id" is 200000 bytes, at most 128`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(websocket.MessageText, []byte(tc.data))
			f := c.untilError()
			if f.Code != tc.code || !strings.Contains(f.errorText(), tc.mention) {
				t.Errorf("got %.300s; want code %s and a message naming %.100s", f.raw, tc.code, tc.mention)
			}
			if strings.Contains(f.errorText(), big[:65]) {
				t.Errorf("the reply quotes more than 64 bytes of the refused value: %.300s", f.raw)
			}
			if len(f.raw) > 1200 {
				t.Errorf("the reply is %d bytes: %.300s...", len(f.raw), f.raw)
			}
			if f.ID != "" {
				t.Errorf("the reply names an id no message could have: %.100s...", f.ID)
			}
		})
	}
}

// TestHTTPRefusalsQuoteLittle: a request refused for its Host or its
// Origin quotes at most 64 bytes of it (docs/gateway.md).
func TestHTTPRefusalsQuoteLittle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	long := strings.Repeat("h", 300) + ".example"
	for _, tc := range []struct {
		name   string
		header string
	}{{"Host", "Host"}, {"Origin", "Origin"}} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", h.srv.URL+"/sessions", nil)
			if tc.header == "Host" {
				req.Host = long
			} else {
				req.Header.Set("Origin", "https://"+long)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), long[:64]) || strings.Contains(string(body), long[:65]) {
				t.Errorf("refused for its %s: %s %q, want 403 quoting 64 bytes of it", tc.header, resp.Status, body)
			}
		})
	}
}

// TestBinaryFrameCountedInvalid: a binary frame, refused with bad_frame
// before it reaches the session, counts as an invalid frame, as every
// other frame refused on its face does.
func TestBinaryFrameCountedInvalid(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, harnessOptions{gateway: gateway.Options{Metrics: m}})
	c, _ := h.newBrowser(nil).open(pageTools)
	c.sendRaw(websocket.MessageBinary, []byte(`{"type": "cancel"}`))
	if f := c.untilError(); f.Code != "bad_frame" {
		t.Fatalf("got %s, want bad_frame", f)
	}
	want := `
# HELP gateway_frames_received_total Frames read from pages, by type (invalid: a frame that did not decode, an unknown type or a bad field included).
# TYPE gateway_frames_received_total counter
gateway_frames_received_total{type="invalid"} 1
gateway_frames_received_total{type="session.open"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gateway_frames_received_total"); err != nil {
		t.Error(err)
	}
}
