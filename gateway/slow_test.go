package gateway_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// Socket buffers small enough that a page which stops reading blocks the
// gateway's writer after a few kilobytes.
const socketBuffer = 4096

// smallSendBuffers shrinks the send buffer of every accepted connection.
func smallSendBuffers(ln net.Listener) net.Listener { return smallBufListener{ln} }

type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketBuffer)
	}
	return c, err
}

// smallReadBuffers is a transport whose connections have a small receive
// buffer.
func smallReadBuffers() *http.Transport {
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(socketBuffer)
		}
		return c, err
	}}
}

func TestSlowBrowserClosed(t *testing.T) {
	h := newHarness(t, harnessOptions{gateway: gateway.Options{SendQueue: 64}, listener: smallSendBuffers})
	other, _ := h.newBrowser(nil).open(pageTools)
	slowBrowser := h.newBrowser(smallReadBuffers())
	slow, id := slowBrowser.open(pageTools)

	// The page stops reading while a long reply streams. The first half
	// fits the queue but not the sockets, so the gateway's writer blocks;
	// the second half overflows the queue.
	slow.say("gated flood")
	waitPublished(t, h, id, floodDeltas)
	close(h.gate)
	h.logs.wait(t, "browser too slow")
	// Only now does the page read again: it gets what was written, then
	// the close.
	if code := slow.untilClosed(); code != websocket.StatusPolicyViolation {
		t.Errorf("close status = %v, want %v", code, websocket.StatusPolicyViolation)
	}

	// Another session is unaffected.
	if got := other.reply("hello"); got != "echo: hello" {
		t.Errorf("the other session's reply = %q", got)
	}

	// Once the reply is complete, the page resumes from its last seq and
	// misses nothing.
	waitTranscript(t, h, id, "flooded")
	again := slowBrowser.withTransport(&http.Transport{}).dial(nil)
	again.send(map[string]any{"type": "session.open", "session": id, "after": slices.Max(append(slow.seqs(), 0)), "tools": pageTools})
	flooded := false
	again.until("the end of the flood", func(f frame) bool {
		if f.Type == "message" && f.transcriptMessage().Content == "flooded" {
			flooded = true
		}
		return flooded && f.Type == "session.idle"
	})
	checkSeqs(t, append(slow.seqs(), again.seqs()...), h.session(id).LastSeq())
	if got := again.reply("hello"); got != "echo: hello" {
		t.Errorf("reply after resuming = %q", got)
	}
}

// waitTranscript waits until the last message of session id's transcript
// says content.
func waitTranscript(t *testing.T, h *harness, id, content string) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		tr := h.transcript(id)
		if len(tr) > 0 && tr[len(tr)-1].Content == content {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transcript does not end with %q", content)
		}
		time.Sleep(time.Millisecond)
	}
}
