package openai

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// maxEvent bounds one event's data: far above a chunk's (a whole tool
// call's arguments in one, from servers that do not stream them), and
// below what one answer may hold (upstream.DefaultMaxBytes).
const maxEvent = 16 << 20

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	Type string
	Data []byte
}

// sseReader reads a text/event-stream as its specification says: lines
// ended by LF, CRLF or CR; "event" and "data" fields, a data of several
// lines joined with LF; comments and other fields skipped; an event ended
// by a blank line. An event the stream's end cuts off (a server's last
// data: [DONE] without its blank line) is read too: it is whole, and
// dropping it would drop a whole turn. One event's data is at most
// maxEvent bytes.
type sseReader struct {
	lines *bufio.Scanner
	ev    sseEvent
	err   error
}

func newSSEReader(r io.Reader) *sseReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), maxEvent+len("data: \r\n"))
	s.Split(sseLines())
	return &sseReader{lines: s}
}

// next reads the next event, and reports false at the stream's end or on
// an error (err).
func (r *sseReader) next() bool {
	var (
		typ     string
		data    []byte
		hasData bool // a data field was read: the event is one
	)
	for r.lines.Scan() {
		line := r.lines.Bytes()
		if len(line) == 0 {
			if !hasData {
				typ = ""
				continue
			}
			return r.dispatch(typ, data)
		}
		if line[0] == ':' {
			continue // a comment: a keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if len(data)+len(value) > maxEvent {
				r.err = fmt.Errorf("%w: an event of more than %d MiB", upstream.ErrTooLarge, maxEvent>>20)
				return false
			}
			data = append(append(data, value...), '\n')
			hasData = true
		}
	}
	if r.err = r.lines.Err(); r.err == nil && hasData {
		return r.dispatch(typ, data)
	}
	return false
}

// dispatch makes the event of typ and data (each line of it ended by LF)
// the one read.
func (r *sseReader) dispatch(typ string, data []byte) bool {
	r.ev = sseEvent{Type: typ, Data: bytes.TrimSuffix(data, []byte("\n"))}
	return true
}

// event is the event next read.
func (r *sseReader) event() sseEvent { return r.ev }

// sseLines is a bufio.SplitFunc for lines ended by LF, CRLF or CR. A line
// ended by CR is given at once, not held until the next byte says whether
// an LF follows (a server that sends CR alone, then waits, would hold its
// events back): the LF, when it comes, is skipped.
func sseLines() bufio.SplitFunc {
	skipLF := false
	return func(data []byte, atEOF bool) (advance int, token []byte, err error) {
		skip := 0 // the LF after a CR given already
		if skipLF && len(data) > 0 {
			skipLF = false
			if data[0] == '\n' {
				skip = 1
			}
		}
		line := data[skip:]
		i := bytes.IndexAny(line, "\r\n")
		switch {
		case i < 0 && atEOF && len(line) > 0:
			return len(data), line, nil
		case i < 0 && atEOF:
			return len(data), nil, nil // nothing, or an LF skipped
		case i < 0:
			// More is needed; the LF is seen again with it (a nil token
			// that advances would end the scan at the stream's end).
			skipLF = skip == 1
			return 0, nil, nil
		case line[i] == '\r':
			skipLF = true
		}
		return skip + i + 1, line[:i], nil
	}
}
