package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A template is text with ${name} placeholders, parsed once at load so a bad
// placeholder is a load error rather than a silent blank at runtime.
type template []segment

// segment is literal text, or a placeholder when isVar is set.
type segment struct {
	text  string
	isVar bool
}

// parseTemplate splits s into literals and placeholders. "$$" is a literal
// "$"; any other "$" not followed by "{" is kept as written, so prices like
// "$5" need no escaping.
func parseTemplate(s string) (template, error) {
	var t template
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			lit.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			lit.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed \"${\" at byte %d (write $$ for a literal $)", i)
			}
			name := s[i+2 : i+2+end]
			if name == "" {
				return nil, fmt.Errorf("empty \"${}\" at byte %d", i)
			}
			if lit.Len() > 0 {
				t = append(t, segment{text: lit.String()})
				lit.Reset()
			}
			t = append(t, segment{text: name, isVar: true})
			i += 2 + end + 1
		default:
			lit.WriteByte('$')
			i++
		}
	}
	if lit.Len() > 0 {
		t = append(t, segment{text: lit.String()})
	}
	return t, nil
}

// vars lists the placeholder names t uses, in order of appearance.
func (t template) vars() []string {
	var names []string
	for _, s := range t {
		if s.isVar {
			names = append(names, s.text)
		}
	}
	return names
}

// render fills the placeholders from vars. With escape set each value is
// escaped as the inside of a JSON string, so a city like `Saint "X"` cannot
// break the arguments a script meant to be well-formed.
func (t template) render(vars map[string]string, escape bool) string {
	var b strings.Builder
	for _, s := range t {
		switch {
		case !s.isVar:
			b.WriteString(s.text)
		case escape:
			b.WriteString(jsonEscape(vars[s.text]))
		default:
			b.WriteString(vars[s.text])
		}
	}
	return b.String()
}

// jsonEscape returns v escaped as JSON string content, without the quotes.
// HTML escaping is off so "<" stays "<" in what the browser shows.
func jsonEscape(v string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}
