package jetstream

import (
	"encoding/json"
	"strconv"

	"github.com/clienttools/gateway/engine"
)

// decodeBatch reads a journal message. The shape encodeBatch writes (as
// encoding/json wrote it before: {"e":[{"q":N,"t":"type","f":frame},...],
// "s":state}, no space) is read by hand, in one pass that checks each
// frame and the state are JSON and keeps them where they lie in data:
// loading a long chat spent most of its time in encoding/json, which
// scanned every frame twice and copied it. Anything else (a member
// missing or moved, an escape in a type, space, a number that is not a
// plain integer) is read by encoding/json as before. FuzzDecodeBatch holds
// the two to one reading. data is kept: the caller must not change it.
func decodeBatch(data []byte) (engine.Batch, error) {
	if b, ok := quickBatch(data); ok {
		return b, nil
	}
	var sb batch
	if err := json.Unmarshal(data, &sb); err != nil {
		return engine.Batch{}, err
	}
	b := engine.Batch{State: sb.State}
	for _, ev := range sb.Events {
		b.Events = append(b.Events, engine.Event{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame})
	}
	return b, nil
}

// quickBatch is decodeBatch's reading by hand; false: read it otherwise.
func quickBatch(data []byte) (engine.Batch, bool) {
	r := batchReader{data: data}
	var b engine.Batch
	if !r.take(`{`) {
		return b, false
	}
	if r.take(`"e":[`) {
		if r.take(`]`) {
			return b, false // encoding/json reads [] as an empty, non-nil slice
		}
		for {
			ev, ok := r.event()
			if !ok {
				return b, false
			}
			b.Events = append(b.Events, ev)
			if r.take(`]`) {
				break
			}
			if !r.take(`,`) {
				return b, false
			}
		}
		if !r.take(`,`) {
			return b, r.take(`}`) && r.i == len(data)
		}
	}
	if !r.take(`"s":`) {
		return b, false
	}
	state, ok := r.value()
	if !ok || string(state) == "null" {
		return b, false
	}
	b.State = state
	return b, r.take(`}`) && r.i == len(data)
}

// batchReader walks a journal message.
type batchReader struct {
	data []byte
	i    int
}

// take consumes s when data continues with it.
func (r *batchReader) take(s string) bool {
	if len(r.data)-r.i < len(s) || string(r.data[r.i:r.i+len(s)]) != s {
		return false
	}
	r.i += len(s)
	return true
}

// event reads {"q":N,"t":"type","f":frame}.
func (r *batchReader) event() (engine.Event, bool) {
	var ev engine.Event
	if !r.take(`{"q":`) {
		return ev, false
	}
	start := r.i
	if r.i < len(r.data) && r.data[r.i] == '-' {
		r.i++
	}
	for r.i < len(r.data) && r.data[r.i] >= '0' && r.data[r.i] <= '9' {
		r.i++
	}
	text := string(r.data[start:r.i])
	if len(text) > 1 && (text[0] == '0' || text[:2] == "-0") {
		return ev, false // a leading zero: not JSON
	}
	seq, err := strconv.ParseInt(text, 10, 64)
	if err != nil || !r.take(`,"t":"`) {
		return ev, false
	}
	start = r.i
	for r.i < len(r.data) && r.data[r.i] != '"' {
		if c := r.data[r.i]; c == '\\' || c < 0x20 || c >= 0x80 {
			return ev, false // escaped, not JSON, or not ASCII (encoding/json mends bad UTF-8): encoding/json's
		}
		r.i++
	}
	ev.Type = string(r.data[start:r.i])
	if !r.take(`","f":`) {
		return ev, false
	}
	frame, ok := r.value()
	if !ok || string(frame) == "null" || !r.take(`}`) {
		return ev, false
	}
	ev.Seq, ev.Frame = seq, frame
	return ev, true
}

// value reads one JSON value (no space around it) and returns it, a
// slice of data with its capacity clipped.
func (r *batchReader) value() (json.RawMessage, bool) {
	start := r.i
	if !r.skip(0) {
		return nil, false
	}
	return r.data[start:r.i:r.i], true
}

// maxBatchDepth bounds the nesting read by hand; deeper goes to
// encoding/json (its own bound is 10,000).
const maxBatchDepth = 256

// skip passes one JSON value as encoding/json's scanner would accept it,
// with no space outside strings (a frame the engine wrote has none).
func (r *batchReader) skip(depth int) bool {
	if r.i >= len(r.data) || depth > maxBatchDepth {
		return false
	}
	switch c := r.data[r.i]; {
	case c == '{':
		r.i++
		if r.take(`}`) {
			return true
		}
		for {
			if r.i >= len(r.data) || r.data[r.i] != '"' || !r.str() || !r.take(`:`) || !r.skip(depth+1) {
				return false
			}
			if r.take(`}`) {
				return true
			}
			if !r.take(`,`) {
				return false
			}
		}
	case c == '[':
		r.i++
		if r.take(`]`) {
			return true
		}
		for {
			if !r.skip(depth + 1) {
				return false
			}
			if r.take(`]`) {
				return true
			}
			if !r.take(`,`) {
				return false
			}
		}
	case c == '"':
		return r.str()
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	default:
		return r.take("true") || r.take("false") || r.take("null")
	}
}

// str passes a string, checking its escapes; bytes that are not UTF-8
// pass, as encoding/json's scanner lets them.
func (r *batchReader) str() bool {
	r.i++ // the quote
	for r.i < len(r.data) {
		switch c := r.data[r.i]; {
		case c == '"':
			r.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			r.i++
			if r.i >= len(r.data) {
				return false
			}
			switch r.data[r.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i++
			case 'u':
				if len(r.data)-r.i < 5 {
					return false
				}
				for _, h := range r.data[r.i+1 : r.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				r.i += 5
			default:
				return false
			}
		default:
			r.i++
		}
	}
	return false
}

// number passes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (r *batchReader) number() bool {
	r.take("-")
	switch {
	case r.take("0"):
	case r.digits() == 0:
		return false
	}
	if r.take(".") && r.digits() == 0 {
		return false
	}
	if r.take("e") || r.take("E") {
		if !r.take("+") {
			r.take("-")
		}
		if r.digits() == 0 {
			return false
		}
	}
	return true
}

// digits passes a run of digits and says how long it was.
func (r *batchReader) digits() int {
	start := r.i
	for r.i < len(r.data) && r.data[r.i] >= '0' && r.data[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}
