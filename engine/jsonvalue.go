package engine

import (
	"encoding/json"
	"unicode/utf8"
)

// quickJSON reads the JSON values that tool arguments and results almost
// always are (objects, arrays, strings without escapes, numbers, literals)
// into what decodeJSON gives the schema checks: map[string]any, []any,
// json.Number, string, bool, nil. It reads them in one pass over the
// string, without encoding/json's decoder, reader and reflection: a
// tenth of a worker call's allocations went there. Anything else (an
// escape in a string, bytes that are not UTF-8, deep nesting, and every
// error) it declines, and decodeJSON reads the value as it always did,
// with encoding/json's answer and error. FuzzQuickJSON holds it to that
// reading.
func quickJSON(s string) (any, bool) {
	p := quickParser{s: s}
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.s)
}

var quickLiterals = [...]struct {
	text string
	v    any
}{{"true", true}, {"false", false}, {"null", nil}}

type quickParser struct {
	s string
	i int
}

// quickMaxDepth bounds the nesting quickJSON reads; deeper values go to
// encoding/json.
const quickMaxDepth = 64

func (p *quickParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *quickParser) value(depth int) (any, bool) {
	p.space()
	if p.i >= len(p.s) || depth > quickMaxDepth {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.literal()
	}
}

// literal reads true, false or null.
func (p *quickParser) literal() (any, bool) {
	for _, lit := range quickLiterals {
		if len(p.s)-p.i >= len(lit.text) && p.s[p.i:p.i+len(lit.text)] == lit.text {
			p.i += len(lit.text)
			return lit.v, true
		}
	}
	return nil, false
}

func (p *quickParser) object(depth int) (any, bool) {
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		key := k.(string)
		if _, dup := m[key]; dup {
			return nil, false // decodeJSONStd names it
		}
		m[key] = v
		if closed, ok := p.next('}'); !ok || closed {
			return m, ok
		}
	}
}

func (p *quickParser) array(depth int) (any, bool) {
	p.i++ // [
	a := []any{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if closed, ok := p.next(']'); !ok || closed {
			return a, ok
		}
	}
}

// next reads what follows a member or an element: a comma (closed false),
// or close, which ends the object or array; ok is false for anything else.
func (p *quickParser) next(close byte) (closed, ok bool) {
	p.space()
	if p.i >= len(p.s) {
		return false, false
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, true
	case close:
		p.i++
		return true, true
	default:
		return false, false
	}
}

// str reads a string with no escape and no control character, all UTF-8;
// it declines any other.
func (p *quickParser) str() (any, bool) {
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			text := p.s[start:j]
			if !ascii && !utf8.ValidString(text) {
				return nil, false
			}
			return text, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// number reads a number as JSON's grammar has it, kept as its text.
func (p *quickParser) number() (any, bool) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		p.digits()
	default:
		return nil, false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false
		}
	}
	return json.Number(p.s[start:p.i]), true
}

// digits reads one or more digits.
func (p *quickParser) digits() bool {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// MaxJSONDepth is how deep encoding/json nests arrays and objects: a value
// nested deeper is refused (tool arguments, results, frames), whatever else
// is right with it.
const MaxJSONDepth = 10000

// JSONTooDeep reports whether data nests arrays and objects deeper than
// MaxJSONDepth, counting outside strings: what to say of JSON that
// encoding/json refuses for its depth alone.
func JSONTooDeep(data []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > MaxJSONDepth {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}
