package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
)

// stream is an answer whose body the test writes as the server would.
func stream(contentType string) (*http.Response, *io.PipeWriter) {
	r, w := io.Pipe()
	res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: r}
	if contentType != "" {
		res.Header.Set("Content-Type", contentType)
	}
	return res, w
}

// waitTimers waits until c has n timers scheduled: the guard set its idle
// timer, or set it again.
func waitTimers(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Pending() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers scheduled, want %d", c.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A stream that sends nothing for Idle is cut off with ErrStalled; bytes
// that come start the wait again.
func TestGuardStalled(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	res, w := stream("text/event-stream; charset=utf-8")
	res, err := Limits{Idle: time.Minute, Clock: c}.Guard(res)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(w, "data: 1\n\n")
	}()
	buf := make([]byte, 64)
	c.Advance(40 * time.Second)
	if n, err := res.Body.Read(buf); n == 0 || err != nil {
		t.Fatalf("first read: %d bytes, %v", n, err)
	}
	// The byte at 40 s moves the cut to 100 s: at 60 s the guard waits on.
	c.Advance(20 * time.Second)
	waitTimers(t, c, 1)
	read := make(chan error, 1)
	go func() {
		_, err := res.Body.Read(buf)
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("a read ended at 60 s, 20 s after the last byte: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	c.Advance(40 * time.Second)
	select {
	case err := <-read:
		if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "1m0s") {
			t.Errorf("read after a minute of nothing: %v, want ErrStalled naming the minute", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream silent for a minute was not cut off")
	}
	if err := res.Body.Close(); err != nil {
		t.Errorf("Close after the cut: %v", err)
	}
	if c.Pending() != 0 {
		t.Errorf("%d timers left after Close", c.Pending())
	}
}

// An answer larger than MaxBytes ends with ErrTooLarge once MaxBytes were
// read.
func TestGuardTooLarge(t *testing.T) {
	res, w := stream("text/event-stream")
	res, err := Limits{MaxBytes: 10}.Guard(res)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(w, strings.Repeat("x", 25))
		w.Close()
	}()
	got, err := io.ReadAll(res.Body)
	if len(got) != 10 || !errors.Is(err, ErrTooLarge) {
		t.Errorf("read %d bytes, %v; want 10, then ErrTooLarge", len(got), err)
	}
	res.Body.Close()
}

// An error status's body is read now, up to MaxErrorBody, and closed; a
// successful answer that is not an event stream is refused.
func TestGuardAnswers(t *testing.T) {
	closed := false
	big := strings.Repeat("e", MaxErrorBody+100)
	res := &http.Response{StatusCode: 500, Header: http.Header{}, Body: readCloser{strings.NewReader(big), &closed}}
	res, err := Limits{}.Guard(res)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if len(got) != MaxErrorBody || !closed {
		t.Errorf("error body: %d bytes read, closed %v; want %d, true", len(got), closed, MaxErrorBody)
	}

	for _, ct := range []string{"text/html", "application/json", ""} {
		closed = false
		res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: readCloser{strings.NewReader("<html>"), &closed}}
		if _, err := (Limits{}).Guard(res); !errors.Is(err, ErrNotEventStream) || !closed {
			t.Errorf("a 200 of %q: %v, closed %v; want ErrNotEventStream, closed", ct, err, closed)
		}
	}
}

type readCloser struct {
	io.Reader
	closed *bool
}

func (r readCloser) Close() error { *r.closed = true; return nil }

func TestMessage(t *testing.T) {
	if got := Message("short"); got != "short" {
		t.Errorf("Message(short) = %q", got)
	}
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	got := Message(long)
	if len(got) > MaxMessage+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "é") {
		t.Errorf("Message of %d bytes: %d bytes, %q…", len(long), len(got), got[:8])
	}
	if trimmed := strings.TrimSuffix(got, "…"); strings.ToValidUTF8(trimmed, "?") != trimmed {
		t.Error("Message cut a character in two")
	}
}
