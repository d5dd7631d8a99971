package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clock"
)

// Defaults of Limits.
const (
	// DefaultIdle is as long as the providers wait for response headers: a
	// local server may think that long over a big prompt before its first
	// token. The hosted APIs send a byte (a ping, a delta) every few seconds.
	DefaultIdle = 10 * time.Minute
	// DefaultMaxBytes is far above what the longest turn streams (a
	// model's 128k output tokens, each delta with its JSON, are about 30
	// MB) and bounds what a server that never ends can make a turn hold.
	DefaultMaxBytes = 64 << 20
	// MaxErrorBody is what is read of an error status's body: the API's
	// explanation is a few hundred bytes; a proxy's page may be more.
	MaxErrorBody = 64 << 10
)

var (
	// ErrStalled: the stream sent nothing for Limits.Idle.
	ErrStalled = errors.New("the server sent nothing")
	// ErrTooLarge: the answer passed Limits.MaxBytes.
	ErrTooLarge = errors.New("the answer is too large")
	// ErrNotEventStream: a successful answer that is not an event stream
	// (text/event-stream), such as a proxy's login page or a server that
	// ignored "stream": true.
	ErrNotEventStream = errors.New("the server's answer is not an event stream")
)

// Limits bound one answer. The zero value of each field means its default.
type Limits struct {
	// Idle is the longest the stream may send nothing.
	Idle time.Duration
	// MaxBytes bounds the bytes read of one answer's body.
	MaxBytes int64
	// Clock times Idle; default the system's.
	Clock clock.Clock
}

func (l Limits) withDefaults() Limits {
	if l.Idle <= 0 {
		l.Idle = DefaultIdle
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Clock == nil {
		l.Clock = clock.Real{}
	}
	return l
}

// Guard applies l to an answer, as the SDKs' middleware does once the
// request is sent: an error status's body is replaced by its first
// MaxErrorBody bytes, read now; a successful answer must be an event
// stream (else ErrNotEventStream, the body closed); its body is bounded
// by l. It returns res, changed in place.
func (l Limits) Guard(res *http.Response) (*http.Response, error) {
	if res.StatusCode >= 400 {
		b, err := io.ReadAll(io.LimitReader(res.Body, MaxErrorBody))
		res.Body.Close()
		if err != nil && len(b) == 0 {
			b = nil
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		return res, nil
	}
	if t, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); t != "text/event-stream" {
		res.Body.Close()
		got := res.Header.Get("Content-Type")
		if got == "" {
			got = "no Content-Type"
		}
		return nil, fmt.Errorf("%w (it is %s, status %d): does the server stream?", ErrNotEventStream, clip(got, 64), res.StatusCode)
	}
	l = l.withDefaults()
	b := &body{rc: res.Body, limits: l}
	b.last.Store(l.Clock.Now().UnixNano())
	b.timer = l.Clock.AfterFunc(l.Idle, b.check)
	res.Body = b
	return res, nil
}

// body is a guarded answer's body.
type body struct {
	rc     io.ReadCloser
	limits Limits
	read   int64
	last   atomic.Int64 // when bytes last came, in ns

	mu      sync.Mutex
	timer   clock.Timer
	stalled bool // the idle timer closed rc
	closed  bool
}

// check runs when Idle has passed since the timer was set: it closes the
// body, which ends a Read that waits, unless bytes came since, in which
// case it waits out the rest.
func (b *body) check() {
	idle := b.limits.Idle
	since := b.limits.Clock.Now().Sub(time.Unix(0, b.last.Load()))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if since < idle {
		b.timer = b.limits.Clock.AfterFunc(idle-since, b.check)
		return
	}
	b.stalled = true
	b.closed = true
	_ = b.rc.Close()
}

func (b *body) Read(p []byte) (int, error) {
	if left := b.limits.MaxBytes - b.read; int64(len(p)) > left {
		if left <= 0 {
			_ = b.Close()
			return 0, fmt.Errorf("%w: more than %s", ErrTooLarge, size(b.limits.MaxBytes))
		}
		p = p[:left]
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if n > 0 {
		b.last.Store(b.limits.Clock.Now().UnixNano())
	}
	if err != nil {
		b.mu.Lock()
		stalled := b.stalled
		b.mu.Unlock()
		if stalled {
			return n, fmt.Errorf("%w for %s", ErrStalled, b.limits.Idle)
		}
	}
	return n, err
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer.Stop()
	if b.closed {
		return nil
	}
	b.closed = true
	return b.rc.Close()
}

// size says n bytes in MiB when it is whole MiB.
func size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// clip is s cut to at most n bytes, on a character's boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// MaxMessage bounds an API's explanation as an error carries it: to the
// pages, the worker, the log and the session's journal.
const MaxMessage = 1 << 10

// Message is an API's explanation, cut to MaxMessage bytes.
func Message(s string) string { return clip(s, MaxMessage) }
