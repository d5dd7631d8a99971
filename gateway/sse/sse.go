package sse

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DefaultWriteTimeout bounds one event's write when New is given none, as
// /ws bounds a frame's.
const DefaultWriteTimeout = 10 * time.Second

// Writer writes one response's events.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

// New writes the status and headers of an event stream (plus header's) and
// returns its Writer. timeout bounds each write; zero: DefaultWriteTimeout.
func New(w http.ResponseWriter, header http.Header, timeout time.Duration) *Writer {
	if timeout <= 0 {
		timeout = DefaultWriteTimeout
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store") // a browser's own chat: no cache keeps it
	h.Set("X-Accel-Buffering", "no")   // nginx: do not buffer the stream
	for k, v := range header {
		h[k] = v
	}
	sw := &Writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
	w.WriteHeader(http.StatusOK)
	sw.flush()
	return sw
}

// ErrBroken: a write failed or timed out; the stream is over.
var ErrBroken = errors.New("the event stream is broken")

// Err is nil while the stream can be written, else why it cannot.
func (sw *Writer) Err() error { return sw.err }

// JSON writes v as one event's data, HTML's <, > and & as they are (not
// in a document: a tool's HTML result would grow sixfold).
func (sw *Writer) JSON(v any) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("failed to encode an event: %w", err)
	}
	return sw.Data(strings.TrimSuffix(b.String(), "\n"))
}

// Data writes one event whose data is line (no newlines).
func (sw *Writer) Data(line string) error { return sw.write("data: " + line + "\n\n") }

// Comment writes a comment line, which clients ignore: a keepalive through
// proxies that close idle connections.
func (sw *Writer) Comment(text string) error { return sw.write(": " + text + "\n\n") }

func (sw *Writer) write(s string) error {
	if sw.err != nil {
		return sw.err
	}
	// Not every ResponseWriter supports deadlines (a test recorder): then
	// the write is unbounded, as before.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if _, err := fmt.Fprint(sw.w, s); err != nil {
		sw.err = fmt.Errorf("%w: %w", ErrBroken, err)
		return sw.err
	}
	sw.flush()
	return sw.err
}

func (sw *Writer) flush() {
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) && sw.err == nil {
		sw.err = fmt.Errorf("%w: %w", ErrBroken, err)
	}
}
