package openai

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

func readSSE(r io.Reader) ([]sseEvent, error) {
	dec := newSSEReader(r)
	var out []sseEvent
	for dec.next() {
		out = append(out, dec.event())
	}
	return out, dec.err
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name, in string
		want     []sseEvent
	}{
		{"LF", "data: a\n\ndata: b\n\n", []sseEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []sseEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"CR", "data: a\r\rdata: b\r\r", []sseEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"comments and other fields", ": keep-alive\n\nid: 7\nretry: 10\ndata: a\n\n", []sseEvent{{Data: []byte("a")}}},
		{"a type, data on two lines", "event: error\ndata: {\"a\":\ndata: 1}\n\n", []sseEvent{{Type: "error", Data: []byte("{\"a\":\n1}")}}},
		{"no space after the colon", "data:[DONE]\n\n", []sseEvent{{Data: []byte("[DONE]")}}},
		{"a type without data is no event", "event: ping\n\ndata: a\n\n", []sseEvent{{Data: []byte("a")}}},
		{"the last event without its blank line", "data: a\n\ndata: [DONE]\n", []sseEvent{{Data: []byte("a")}, {Data: []byte("[DONE]")}}},
		{"the last line without its end", "data: a\n\ndata: [DONE]", []sseEvent{{Data: []byte("a")}, {Data: []byte("[DONE]")}}},
		{"an empty data is an event", "data\n\n", []sseEvent{{Data: []byte{}}}},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tt.in)
			if oneByte {
				r = iotest.OneByteReader(r) // a CR at a read's end, an LF in the next
			}
			got, err := readSSE(r)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s (a byte a read: %v): %q, %v; want %q", tt.name, oneByte, got, err, tt.want)
			}
		}
	}
}

func TestSSEReaderBoundsAnEvent(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<20) + "\n"
	_, err := readSSE(strings.NewReader(strings.Repeat(line, maxEvent>>20+1) + "\n"))
	if !errors.Is(err, upstream.ErrTooLarge) {
		t.Errorf("an event of %d MiB: %v, want upstream.ErrTooLarge", maxEvent>>20+1, err)
	}
}

// The events read do not depend on how the stream is cut into reads.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: a\r\n\r\n", "data: a\r\rdata: b\n", "event: x\ndata\n\n:c\r\n", "data: [DONE]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		whole, err1 := readSSE(strings.NewReader(in))
		bytewise, err2 := readSSE(iotest.OneByteReader(strings.NewReader(in)))
		if !reflect.DeepEqual(whole, bytewise) || (err1 == nil) != (err2 == nil) {
			t.Errorf("%q: read whole %q (%v), a byte a read %q (%v)", in, whole, err1, bytewise, err2)
		}
	})
}

// An event is read once its blank line came, whatever its line ends: a
// server that ends lines with CR alone, then waits, does not hold its
// events back until its next byte.
func TestSSEReaderDoesNotWaitPastACR(t *testing.T) {
	for _, ends := range []string{"\r", "\n", "\r\n"} {
		r, w := io.Pipe()
		go io.WriteString(w, "data: a"+ends+ends+"data: [DONE]"+ends+ends) // and the stream stays open
		dec := newSSEReader(r)
		read := make(chan []string, 1)
		go func() {
			var got []string
			for dec.next() {
				got = append(got, string(dec.event().Data))
				if len(got) == 2 {
					read <- got
				}
			}
		}()
		select {
		case got := <-read:
			if want := []string{"a", "[DONE]"}; !slices.Equal(got, want) {
				t.Errorf("line ends %q: events %q, want %q", ends, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("line ends %q: the events were not read while the stream stays open", ends)
		}
		w.Close() // ends the reader's goroutine
	}
}
