package gateway_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// maskedTextFrame is a client's text frame, as RFC 6455 has a client send
// it: masked.
func maskedTextFrame(payload []byte) []byte {
	b := []byte{0x81} // FIN, text
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var key [4]byte
	_, _ = rand.Read(key[:])
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// readServerFrame reads one unmasked, unfragmented frame.
func readServerFrame(r *bufio.Reader) (opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0]&0x80 == 0 || h[1]&0x80 != 0 {
		return 0, nil, fmt.Errorf("frame header %x: want a final, unmasked frame", h)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r, payload)
	return h[0] & 0x0f, payload, err
}

// A client may send its first frames in the same packet as its upgrade
// request, before it has the answer: the gateway reads them all, however
// long, and its answers (short and long) arrive whole.
func TestFramesSentWithTheUpgrade(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	b := h.newBrowser(nil)
	u, err := url.Parse(h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var cookies []string
	for _, c := range b.client.Jar.Cookies(u) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hang))

	long := strings.Repeat("a long message ", 400) // 6,000 bytes: past every buffer on the way
	open, _ := json.Marshal(map[string]any{"type": "session.open", "tools": pageTools})
	message, _ := json.Marshal(map[string]any{"type": "message", "content": long})
	req := "GET /ws HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: " + strings.Join(cookies, "; ") + "\r\n\r\n"
	packet := append([]byte(req), maskedTextFrame(open)...)
	packet = append(packet, maskedTextFrame(message)...)
	if _, err := conn.Write(packet); err != nil {
		t.Fatal(err)
	}

	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	var opened bool
	for {
		op, payload, err := readServerFrame(r)
		if err != nil {
			t.Fatalf("reading frames (session.opened seen: %v): %v", opened, err)
		}
		if op != 0x1 {
			t.Fatalf("opcode %d (%q), want text frames only", op, payload)
		}
		var f frame
		if err := json.Unmarshal(payload, &f); err != nil {
			t.Fatalf("frame %q: %v", payload, err)
		}
		switch f.Type {
		case "session.opened":
			opened = true
		case "error":
			t.Fatalf("the gateway refused a frame: %s", payload)
		case "message":
			if got := f.transcriptMessage(); opened && got.Role == "assistant" {
				if want := "echo: " + strings.TrimSpace(long); got.Content != want {
					t.Fatalf("reply of %d bytes, want the %d-byte echo", len(got.Content), len(want))
				}
				return
			}
		}
	}
}
