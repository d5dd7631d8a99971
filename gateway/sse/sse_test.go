package sse_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/gateway/sse"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEvents: each value is one data line, a comment is ignored by
// clients, and the headers are an event stream's.
func TestEvents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := sse.New(w, http.Header{"X-Extra": {"1"}}, 0)
		_ = sw.JSON(map[string]any{"type": "start"})
		_ = sw.Comment("keepalive")
		_ = sw.Data("[DONE]")
		if err := sw.JSON(func() {}); err == nil {
			t.Error("a value JSON cannot encode was written")
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("X-Extra") != "1" {
		t.Errorf("headers %v", resp.Header)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	want := "data: {\"type\":\"start\"}||: keepalive||data: [DONE]|"
	if got := strings.Join(lines, "|"); got != want {
		t.Errorf("body lines %q, want %q", got, want)
	}
}

// TestStalledReader: a client that reads nothing loses the stream once a
// write cannot finish within the timeout; the handler is not held.
func TestStalledReader(t *testing.T) {
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := sse.New(w, nil, 50*time.Millisecond)
		big := strings.Repeat("x", 64<<10)
		for sw.Data(big) == nil {
		}
		done <- sw.Err()
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Read nothing.
	select {
	case err := <-done:
		if !errors.Is(err, sse.ErrBroken) {
			t.Errorf("Err() = %v, want ErrBroken", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler is still writing to a client that reads nothing")
	}
}
