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

// TestCompressedFrames: with CompressOver, a browser that offers
// permessage-deflate (as every current browser does) gets a large frame in
// a fraction of its bytes and a small one as it is, and both read back
// whole; off (the default), or for a browser that does not offer it, or
// offers a window the gateway does not take, every frame goes as it is.
func TestCompressedFrames(t *testing.T) {
	for _, tc := range []struct {
		name       string
		over       int
		offer      string // the upgrade's Sec-WebSocket-Extensions; "deflate": the library's own offer
		compressed bool
	}{
		{"offered", 1024, "deflate", true},
		{"offered, off at the gateway (the default)", 0, "deflate", false},
		{"not offered", 1024, "", false},
		{"offered with a window the gateway does not take", 1024, "permessage-deflate; server_max_window_bits=10", false},
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
			opts := &websocket.DialOptions{HTTPClient: b.client, HTTPHeader: http.Header{}}
			switch tc.offer {
			case "deflate":
				opts.CompressionMode = websocket.CompressionNoContextTakeover
			case "":
			default:
				opts.HTTPHeader.Set("Sec-WebSocket-Extensions", tc.offer)
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
			// echo sends a message, and reads its event back: the bytes on
			// the wire for that frame (and the few small ones before it).
			echo := func(content string) (frame, int64) {
				before := wire.Load()
				c.send(map[string]any{"type": "message", "content": content})
				f := c.until("the message's event", func(f frame) bool { return f.Type == "message" && f.transcriptMessage().Content == content })
				return f, wire.Load() - before
			}
			long, read := echo(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 3000))
			if tc.compressed && read > int64(len(long.raw))/10 {
				t.Errorf("a %d-byte frame took %d bytes on the wire", len(long.raw), read)
			}
			if !tc.compressed && read < int64(len(long.raw)) {
				t.Errorf("a %d-byte frame took %d bytes on the wire, uncompressed", len(long.raw), read)
			}
			c.idleReply()
			// Under the threshold, a frame goes as it is.
			short, read := echo(strings.Repeat("lazy dog ", 60))
			if len(short.raw) >= 1024 || read < int64(len(short.raw)) {
				t.Errorf("a %d-byte frame took %d bytes on the wire: compressed under the threshold", len(short.raw), read)
			}
			c.idleReply()
		})
	}
}
