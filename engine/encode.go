package engine

import (
	"bytes"
	"encoding/json"
	"sync"
	"unicode/utf8"
)

// jsonBuf is a buffer with its encoder, for withJSON, and a buffer for
// the values that write themselves (jsonAppender).
type jsonBuf struct {
	b   bytes.Buffer
	enc *json.Encoder
	raw []byte
}

// jsonAppender is a value that writes itself as json.Marshal writes it,
// without reflection, or says it cannot (false), and encoding/json does:
// the payloads of the events every turn publishes (eventenc.go).
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, bool)
}

var jsonBufs = sync.Pool{New: func() any {
	j := &jsonBuf{}
	j.enc = json.NewEncoder(&j.b)
	j.enc.SetEscapeHTML(false)
	return j
}}

// maxPooledJSON is the largest buffer withJSON keeps for the next use.
const maxPooledJSON = 64 << 10

// The gateway's JSON leaves HTML's <, > and & as they are, where
// encoding/json's Marshal writes \u003c, \u003e and \u0026: it goes to
// pages, stores and workers, never into an HTML document, and a tool's
// HTML result came out six times its size (a frame of 6 MB for a result of
// 1 MB of "<"), in its tool.finished, the journal and the worker's
// request.

// Marshal is json.Marshal without HTML's escapes.
func Marshal(v any) ([]byte, error) {
	var out []byte
	err := withJSON(v, func(body []byte) { out = append([]byte(nil), body...) })
	return out, err
}

// withJSON encodes v as Marshal does into a pooled buffer and calls f with
// the bytes, which are valid only during f: a frame is built from them
// with one allocation, instead of Marshal's result and then the frame.
func withJSON(v any, f func(body []byte)) error {
	j := jsonBufs.Get().(*jsonBuf)
	if a, ok := v.(jsonAppender); ok {
		if body, ok := a.appendJSON(j.raw[:0]); ok {
			f(body)
			if cap(body) <= maxPooledJSON {
				j.raw = body[:0]
			}
			jsonBufs.Put(j)
			return nil
		}
	}
	j.b.Reset()
	err := j.enc.Encode(v)
	if err == nil {
		body := j.b.Bytes()
		f(body[:len(body)-1]) // Encode ends with a newline
	}
	if j.b.Cap() <= maxPooledJSON {
		jsonBufs.Put(j)
	}
	return err
}

// AppendJSONString appends s quoted as Marshal writes a string: invalid
// UTF-8 as U+FFFD, and U+2028 and U+2029 escaped (HTML's <, > and & are
// not). The engine's frames and state, and the stores' records, are
// written with it.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
