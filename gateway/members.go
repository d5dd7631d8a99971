package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clienttools/gateway/engine"
)

// memberSet is a frame's top-level members. A frame of up to maxMembers
// members whose names have no escapes (every frame a page sends) is read
// in one pass over its bytes, without copying them; any other falls back
// to decoding the members into a map. Both give the same answers: a name
// given twice is the last value, as encoding/json decodes it.
type memberSet struct {
	n    int
	fast [maxMembers]member
	slow map[string]json.RawMessage // nil on the fast path
}

// maxMembers is the most members the fast path holds: tool.error has 7.
const maxMembers = 8

// member is one name and its raw value, both slices of the frame.
type member struct{ name, value []byte }

// read reads data's members; the errors are members'.
func (m *memberSet) read(data []byte) error {
	if !json.Valid(data) {
		if engine.JSONTooDeep(data) {
			return fmt.Errorf("%w: the frame nests arrays and objects more than %d deep, the most a frame may", ErrBadFrame, engine.MaxJSONDepth)
		}
		return fmt.Errorf("%w: not JSON: send one JSON object per text frame", ErrBadFrame)
	}
	if m.scan(data) {
		return nil
	}
	m.n = 0
	var err error
	m.slow, err = members(data)
	return err
}

// has reports whether the frame has the member name.
func (m *memberSet) has(name string) bool {
	_, ok := m.get(name)
	return ok
}

// get returns the value of the member name.
func (m *memberSet) get(name string) ([]byte, bool) {
	if m.slow != nil {
		v, ok := m.slow[name]
		return v, ok
	}
	for i := m.n - 1; i >= 0; i-- {
		if string(m.fast[i].name) == name {
			return m.fast[i].value, true
		}
	}
	return nil, false
}

// value is the member name's value on the fast path; nil if it has none.
func (m *memberSet) value(name string) []byte {
	v, _ := m.get(name)
	return v
}

// caseCheck refuses a member whose name one of want was surely meant by:
// that name in another letter case (encoding/json would take "ID" for
// "id", so two spellings of one field could disagree), or, in its place,
// a name a letter off or with a suffix (nearMiss: "retriable",
// "sessionId"), which would be ignored as a member a frame does not
// define is (so later versions can add members), and the frame would mean
// something else than its sender meant.
func (m *memberSet) caseCheck(typ string, want []string) error {
	check := func(name []byte) error {
		for _, w := range want {
			if string(name) == w {
				return nil
			}
		}
		for _, w := range want {
			switch {
			case bytes.EqualFold(name, []byte(w)):
				return fmt.Errorf("%w: %s has %q: member names are case-sensitive, write %q", ErrBadFrame, typ, name, w)
			case nearMiss(name, w) && !m.has(w):
				// Only in place of w: beside it, a name near it (context
				// and content) is another member, ignored.
				return fmt.Errorf("%w: %s has %q and no %q: write %q (a member a frame does not define is ignored, but not one this near a name it does, in its place)", ErrBadFrame, typ, name, w, w)
			}
		}
		return nil
	}
	if m.slow != nil {
		for name := range m.slow {
			if err := check([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, mb := range m.fast[:m.n] {
		if err := check(mb.name); err != nil {
			return err
		}
	}
	return nil
}

// nearMiss reports whether name, not w, is w misspelt: w with a suffix
// ("sessionId", "session_id" for "session"), or one letter added, left out
// or changed ("retriable" for "retryable"), in any letter case. Short
// names (id, code) are left alone: too many other words are near them.
func nearMiss(name []byte, w string) bool {
	if len(w) < 5 {
		return false
	}
	if len(name) > len(w) && bytes.EqualFold(name[:len(w)], []byte(w)) {
		return true
	}
	n, m := len(name), len(w)
	if n < m-1 || n > m+1 {
		return false
	}
	i := 0
	for i < n && i < m && lower(name[i]) == lower(w[i]) {
		i++
	}
	j, k := n, m // the common suffix
	for j > i && k > i && lower(name[j-1]) == lower(w[k-1]) {
		j, k = j-1, k-1
	}
	return j-i <= 1 && k-i <= 1
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// scan reads the members of data, valid JSON, on the fast path; false
// when data needs the general one (not an object, a name with an escape
// or a byte beyond ASCII, more than maxMembers members).
func (m *memberSet) scan(data []byte) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return true
	}
	for {
		if data[i] != '"' || m.n == maxMembers {
			return false
		}
		end, escaped := scanString(data, i)
		name := data[i+1 : end-1]
		if escaped || !ascii(name) {
			return false // encoding/json unescapes it, or mends bad UTF-8
		}
		i = skipSpace(data, end) // at ':'
		i = skipSpace(data, i+1)
		start := i
		i = skipValue(data, i)
		m.fast[m.n] = member{name: name, value: data[start:i]}
		m.n++
		i = skipSpace(data, i)
		if data[i] != ',' {
			return true // '}'
		}
		i = skipSpace(data, i+1)
	}
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string that starts at data[i],
// and whether it has an escape.
func scanString(data []byte, i int) (end int, escaped bool) {
	j := i + 1
	for data[j] != '"' {
		if data[j] == '\\' {
			escaped = true
			j++
		}
		j++
	}
	return j + 1, escaped
}

// skipValue returns the index after the value that starts at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		end, _ := scanString(data, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch data[j] {
			case '"':
				end, _ := scanString(data, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
	default: // a number, true, false or null
		j := i
		for j < len(data) && !strings.ContainsRune(", \t\r\n}]", rune(data[j])) {
			j++
		}
		return j
	}
}

// browserFrames are the types a page sends, for knownType.
var browserFrames = []string{FrameToolResult, FrameMessage, FrameToolError, FrameToolProgress,
	FrameToolApprove, FrameSessionOpen, FrameCancel, FramePing}

// knownType returns the frame type raw names when it is one of
// browserFrames, written without escapes, without allocating.
func knownType(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	name := raw[1 : len(raw)-1]
	for _, t := range browserFrames {
		if string(name) == t {
			return t, true
		}
	}
	return "", false
}
