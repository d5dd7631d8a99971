package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clienttools/gateway/jsonfields"
)

// Script is a scripted model's whole behaviour. It is the Go form of the JSON
// documented in docs/scripts.md; zero fields mean the defaults.
type Script struct {
	// Comment is ignored: JSON has no comments, and script authors want notes.
	Comment string `json:"comment,omitempty"`
	// Rules answer a user message: the first whose Match matches wins.
	Rules []Rule `json:"rules,omitempty"`
	// AfterTool says what came back, once per tool message, when the
	// transcript ends with tool results. A result no entry covers gets the
	// default "<tool> returned: <result>" or "<tool> failed: <error>".
	AfterTool []AfterTool `json:"afterTool,omitempty"`
	// Fallback answers a user message no rule matches. It may use ${message}.
	// Default: a sentence saying no rule matched.
	Fallback string `json:"fallback,omitempty"`
	// ChunkWords is how many words each streamed delta carries. Default 3;
	// 1 makes the most deltas, a large number sends the text in one delta.
	ChunkWords int `json:"chunkWords,omitempty"`
	// Delay is a Go duration ("40ms") waited before each delta. Default 0,
	// which keeps tests fast; a delay makes streaming and cancellation
	// visible in a browser at the cost of slower turns.
	Delay string `json:"delay,omitempty"`
}

// Rule answers a user message that its regexp matches.
type Rule struct {
	Comment string `json:"comment,omitempty"`
	// Match is a Go (RE2) regexp matched against the latest user message,
	// trimmed of surrounding space. Its groups, named or numbered, fill the
	// ${...} placeholders of Say and of the tool arguments. Required.
	Match string `json:"match"`
	// Say is the text the model streams. A rule needs Say, Tools or both.
	Say string `json:"say,omitempty"`
	// Tools are called after Say, in order; several make parallel tool uses
	// in one turn.
	Tools []ToolCall `json:"tools,omitempty"`
	// ChunkWords and Delay override the script's for this rule's reply.
	ChunkWords int    `json:"chunkWords,omitempty"`
	Delay      string `json:"delay,omitempty"`
}

// ToolCall is one tool use a rule makes.
type ToolCall struct {
	// Name is the tool's name, required. It need not be declared by the
	// agent, so a script can test unknown tools.
	Name string `json:"name"`
	// Arguments is streamed as the tool use's raw argument string; empty
	// means "{}". Placeholders are JSON-escaped.
	Arguments Arguments `json:"arguments,omitempty"`
}

// Arguments is a tool use's raw argument string. In JSON it is either a
// string, sent exactly as written (so a script can send malformed arguments),
// or any other JSON value, sent compacted (the easy way to write an object).
type Arguments string

// UnmarshalJSON accepts a string as is and any other value compacted.
func (a *Arguments) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*a = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Arguments(s)
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*a = Arguments(buf.String())
	return nil
}

// MarshalJSON writes the argument string as a JSON string, which reads back
// unchanged.
func (a Arguments) MarshalJSON() ([]byte, error) { return json.Marshal(string(a)) }

// AfterTool words one tool result. An entry applies when Tool and Match fit
// and it has a template for the outcome (OK for a result, Error for a
// failure); the first that applies wins.
type AfterTool struct {
	Comment string `json:"comment,omitempty"`
	// Tool is the tool's name; empty matches any tool.
	Tool string `json:"tool,omitempty"`
	// Match is a regexp on the result or error text; empty matches any.
	// A JSON result is matched compacted (`{"approved":true}`) and a JSON
	// string unquoted. Its groups fill placeholders.
	Match string `json:"match,omitempty"`
	// OK words a result; it may use ${tool} and ${result}.
	OK string `json:"ok,omitempty"`
	// Error words a failure; it may use ${tool} and ${error}.
	Error string `json:"error,omitempty"`
	// Tools are called again after the sentence, as a model that keeps
	// working does: a script that calls a tool after every result loops
	// until the gateway's guards stop it. Arguments may use ${tool},
	// ${result}, ${error} and Match's groups.
	Tools []ToolCall `json:"tools,omitempty"`
}

// Defaults, documented in docs/scripts.md.
const (
	defaultChunkWords = 3
	defaultFallback   = "I'm a scripted model and no rule of my script matches that."
	defaultOK         = "${tool} returned: ${result}"
	defaultError      = "${tool} failed: ${error}"
)

// Load reads a JSON script and compiles it. Errors name the line and column
// of bad JSON, or the field that is wrong, as "rules[2].match: ...".
func Load(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("scripted: failed to read script: %w", err)
	}
	s, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	m, err := compile(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return m, nil
}

// LoadFile loads the script at path; errors start with the path.
func LoadFile(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: failed to read script: %w", err)
	}
	s, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", path, err)
	}
	m, err := compile(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: %s: %w", path, err)
	}
	return m, nil
}

// New compiles a script. It fails on what Load would reject after parsing:
// regexps that do not compile, unknown placeholders, bad delays.
func New(s Script) (*Model, error) {
	m, err := compile(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return m, nil
}

// decode parses a script strictly: unknown fields are errors, because a
// misspelt "afterTools" silently ignored is a test that passes for the
// wrong reason.
func decode(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, jsonError(data, err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		rest := data[end:]
		end += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		return Script{}, fmt.Errorf("%s: unexpected data after the script object", position(data, end))
	}
	return s, nil
}

// jsonError adds a line and column to the decoder's errors, which only carry
// a byte offset.
func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("the script is empty: want a JSON object like {\"rules\": [...]}")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the script ends early: unexpected end of JSON")
	case errors.As(err, &syn):
		return fmt.Errorf("%s: %w", position(data, syn.Offset-1), err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Errorf("%s: the script must be a JSON object, not %s", position(data, typ.Offset-1), typ.Value)
		}
		return fmt.Errorf("%s: %s must be %s, not %s", position(data, typ.Offset-1), field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	// encoding/json reports an unknown field without an offset or the
	// object it is in; walk the script to find both, so the author need
	// not hunt for a typo, or for a field written in the wrong object.
	if _, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, found := findUnknownField(data); found {
			msg := fmt.Sprintf("%s: unknown field %q", position(data, u.offset), u.name)
			if u.path != "" {
				msg += " in " + u.path
			}
			if guess := closestField(u.name, u.allowed); guess != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", guess)
			} else {
				msg += fmt.Sprintf(" (it takes %s)", quoteAll(u.allowed))
			}
			return errors.New(msg)
		}
	}
	return err
}

// unknownField is where a script has a key its object does not take.
type unknownField struct {
	offset  int64
	name    string
	path    string   // the object: "" for the script, rules[0], afterTool[1].tools[0]
	allowed []string // the keys that object takes
}

// findUnknownField walks data, a script that decodes but for an unknown
// field, along Script's types, to the first key its object does not take.
func findUnknownField(data []byte) (unknownField, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var found unknownField
	var walk func(t reflect.Type, path string) bool // true: found, stop
	walk = func(t reflect.Type, path string) bool {
		switch {
		case t.Kind() == reflect.Struct:
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				return false
			}
			fields := jsonfields.Of(t)
			for dec.More() {
				at := dec.InputOffset()
				tok, err := dec.Token()
				if err != nil {
					return false
				}
				name, _ := tok.(string)
				i := slices.IndexFunc(fields, func(f jsonfields.Field) bool { return f.Name == name })
				if i < 0 {
					found = unknownField{offset: keyStart(data, at), name: name, path: path, allowed: jsonfields.Names(t)}
					return true
				}
				if walk(fields[i].Type, strings.TrimPrefix(path+"."+name, ".")) {
					return true
				}
			}
			_, _ = dec.Token() // }
			return false
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return false
			}
			for i := 0; dec.More(); i++ {
				if walk(t.Elem(), fmt.Sprintf("%s[%d]", path, i)) {
					return true
				}
			}
			_, _ = dec.Token() // ]
			return false
		}
		var skip json.RawMessage
		_ = dec.Decode(&skip)
		return false
	}
	walk(reflect.TypeFor[Script](), "")
	return found, found.name != ""
}

// keyStart is where the key after offset begins: past the white space
// and the comma before it.
func keyStart(data []byte, offset int64) int64 {
	for offset < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[offset]) >= 0 {
		offset++
	}
	return offset
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}

// closestField suggests the field of allowed a typo most likely meant:
// the same letters in another case, or at most two edits away.
func closestField(name string, allowed []string) string {
	best, bestDist := "", 3
	for _, f := range allowed {
		if strings.EqualFold(f, name) {
			return f
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(f)); d < bestDist {
			best, bestDist = f, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct":
		return "an object"
	case "int", "int64":
		return "an integer"
	}
	return kind
}

// position turns the index of a byte into "line L, column C" (both from 1).
// The decoder's offsets count the bytes read, the offending one included, so
// callers pass them minus one.
func position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// compile validates s and builds the immutable Model.
func compile(s Script) (*Model, error) {
	m := &Model{}
	var err error
	if m.chunkWords, err = chunkWords(s.ChunkWords, defaultChunkWords, "chunkWords"); err != nil {
		return nil, err
	}
	if m.delay, err = delay(s.Delay, 0, "delay"); err != nil {
		return nil, err
	}
	fallback := s.Fallback
	if fallback == "" {
		fallback = defaultFallback
	}
	if m.fallback, err = checkedTemplate(fallback, "fallback", []string{"message"}, ""); err != nil {
		return nil, err
	}
	for i, r := range s.Rules {
		cr, err := compileRule(r, fmt.Sprintf("rules[%d]", i), m)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, cr)
	}
	for i, a := range s.AfterTool {
		ca, err := compileAfter(a, fmt.Sprintf("afterTool[%d]", i))
		if err != nil {
			return nil, err
		}
		m.after = append(m.after, ca)
	}
	m.defaultOK, _ = parseTemplate(defaultOK)
	m.defaultErr, _ = parseTemplate(defaultError)
	return m, nil
}

func compileRule(r Rule, path string, m *Model) (rule, error) {
	var cr rule
	if r.Match == "" {
		return cr, fmt.Errorf("%s.match: required (a regexp; \"(?i)hello\" matches any message containing hello)", path)
	}
	if r.Say == "" && len(r.Tools) == 0 {
		return cr, fmt.Errorf("%s: needs \"say\", \"tools\" or both", path)
	}
	re, err := regexp.Compile(r.Match)
	if err != nil {
		return cr, fmt.Errorf("%s.match: %w", path, err)
	}
	cr.re = re
	groups := groupNames(re)
	matchPath := path + ".match"
	if cr.say, err = checkedTemplate(r.Say, path+".say", groups, matchPath); err != nil {
		return cr, err
	}
	for j, tc := range r.Tools {
		tpath := fmt.Sprintf("%s.tools[%d]", path, j)
		if tc.Name == "" {
			return cr, fmt.Errorf("%s.name: required", tpath)
		}
		args := string(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		t, err := checkedTemplate(args, tpath+".arguments", groups, matchPath)
		if err != nil {
			return cr, err
		}
		cr.tools = append(cr.tools, toolTemplate{name: tc.Name, args: t})
	}
	if cr.chunkWords, err = chunkWords(r.ChunkWords, m.chunkWords, path+".chunkWords"); err != nil {
		return cr, err
	}
	if cr.delay, err = delay(r.Delay, m.delay, path+".delay"); err != nil {
		return cr, err
	}
	return cr, nil
}

func compileAfter(a AfterTool, path string) (after, error) {
	ca := after{tool: a.Tool}
	if a.OK == "" && a.Error == "" {
		return ca, fmt.Errorf("%s: needs \"ok\", \"error\" or both", path)
	}
	var groups []string
	if a.Match != "" {
		re, err := regexp.Compile(a.Match)
		if err != nil {
			return ca, fmt.Errorf("%s.match: %w", path, err)
		}
		ca.re = re
		groups = groupNames(re)
		for _, g := range groups {
			if g == "tool" || g == "result" || g == "error" {
				return ca, fmt.Errorf("%s.match: group name %q is reserved for the built-in ${%s}; rename the group", path, g, g)
			}
		}
	}
	var err error
	for j, tc := range a.Tools {
		tpath := fmt.Sprintf("%s.tools[%d]", path, j)
		if tc.Name == "" {
			return ca, fmt.Errorf("%s.name: required", tpath)
		}
		args := string(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		t, err := checkedTemplate(args, tpath+".arguments", append([]string{"tool", "result", "error"}, groups...), "")
		if err != nil {
			return ca, err
		}
		ca.tools = append(ca.tools, toolTemplate{name: tc.Name, args: t})
	}
	if a.OK != "" {
		if ca.ok, err = checkedTemplate(a.OK, path+".ok", append([]string{"tool", "result"}, groups...), ""); err != nil {
			return ca, err
		}
	}
	if a.Error != "" {
		if ca.err, err = checkedTemplate(a.Error, path+".error", append([]string{"tool", "error"}, groups...), ""); err != nil {
			return ca, err
		}
	}
	return ca, nil
}

// groupNames lists what a rule's placeholders may name: "0" to "n" and the
// named groups.
func groupNames(re *regexp.Regexp) []string {
	var names []string
	for i, name := range re.SubexpNames() {
		names = append(names, strconv.Itoa(i))
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// checkedTemplate parses s and checks every placeholder is in known. from
// names the regexp the groups come from, for the error message.
func checkedTemplate(s, path string, known []string, from string) (template, error) {
	t, err := parseTemplate(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, name := range t.vars() {
		if slices.Contains(known, name) {
			continue
		}
		if from != "" {
			return nil, fmt.Errorf("%s: ${%s} is not a group of %s (its groups: %s)", path, name, from, listNames(known))
		}
		return nil, fmt.Errorf("%s: ${%s} is not known here (known: %s)", path, name, listNames(known))
	}
	return t, nil
}

// listNames shows names for an error, naming groups before numbers since
// those are what authors usually mean.
func listNames(names []string) string {
	var named, numbered []string
	for _, n := range names {
		if _, err := strconv.Atoi(n); err == nil {
			numbered = append(numbered, n)
		} else {
			named = append(named, n)
		}
	}
	return strings.Join(append(named, numbered...), ", ")
}

func chunkWords(n, inherit int, path string) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%s: must not be negative (0: the default), not %d", path, n)
	case n == 0:
		return inherit, nil
	}
	return n, nil
}

func delay(s string, inherit time.Duration, path string) (time.Duration, error) {
	if s == "" {
		return inherit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: want a Go duration like \"40ms\": %w", path, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: must not be negative, not %q", path, s)
	}
	return d, nil
}
