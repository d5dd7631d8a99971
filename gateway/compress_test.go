package gateway_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// countingConn counts the bytes read from the network.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestCompressedFrames: a browser that offers permessage-deflate (as every
// current browser does) gets a large frame in a fraction of its bytes, and
// the frames read back whole; --compress-over -1 does not negotiate it, and
// a browser that does not offer it gets every frame as it is.
func TestCompressedFrames(t *testing.T) {
	for _, tc := range []struct {
		name       string
		over       int
		offer      bool
		compressed bool
	}{
		{"offered", 0, true, true},
		{"offered, off at the gateway", -1, true, false},
		{"not offered", 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{gateway: gateway.Options{CompressOver: tc.over}})
			var wire atomic.Int64
			dialer := &net.Dialer{}
			b := h.newBrowser(&http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &wire}, nil
			}})
			opts := &websocket.DialOptions{HTTPClient: b.client}
			if tc.offer {
				opts.CompressionMode = websocket.CompressionNoContextTakeover
			}
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			ws, resp, err := websocket.Dial(ctx, h.wsURL(), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ws.CloseNow() })
			ws.SetReadLimit(64 << 20)
			if got := strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate"); got != tc.compressed {
				t.Fatalf("the upgrade's extensions: %q; want permessage-deflate %t", resp.Header.Get("Sec-WebSocket-Extensions"), tc.compressed)
			}
			c := &wsClient{t: t, ws: ws}
			c.send(map[string]any{"type": "session.open"})
			c.untilType("session.opened")
			// A long message comes back in its message event, whole.
			content := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 3000)
			before := wire.Load()
			c.send(map[string]any{"type": "message", "content": content})
			echo := c.until("the message's event", func(f frame) bool { return f.Type == "message" && f.transcriptMessage().Content == content })
			read := wire.Load() - before
			if tc.compressed && read > int64(len(echo.raw))/10 {
				t.Errorf("a %d-byte frame took %d bytes on the wire", len(echo.raw), read)
			}
			if !tc.compressed && read < int64(len(echo.raw)) {
				t.Errorf("a %d-byte frame took %d bytes on the wire, uncompressed", len(echo.raw), read)
			}
			// Small frames (the stream's) come as they are, and read whole.
			c.idleReply()
		})
	}
}
