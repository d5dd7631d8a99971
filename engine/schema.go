package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// toolSchemas are a tool's compiled schemas; nil means unchecked.
type toolSchemas struct {
	input  *schema
	output *schema
}

// compileSchema compiles one schema of a tool. Schemas must be
// self-contained: a $ref to anything outside the document is refused, so a
// worker's config can never make the gateway read files or the network.
func compileSchema(tool, which string, raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	// The URL is fixed, not built from the tool's name: a name with "#" or a
	// space made the library panic or fail to find its own resource. Each
	// schema has its own compiler, so the URLs cannot collide.
	url := "tool:///" + which + ".json"
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("refusing to load %s: schemas must be self-contained", s)
	}
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: tool %q: %s schema is not JSON: %v", ErrBadConfig, tool, which, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: %s schema does not compile: %s", ErrBadConfig, tool, which, schemaErrorText(err))
	}
	return newSchema(s), nil
}

// schemaCache keeps compiled schemas by their text, so the sessions of one
// agent share them instead of compiling and holding their own. A compiled
// schema is read-only, safe to validate against from many goroutines.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*schema
}

// maxCachedSchemas bounds the cache, so workers that send ever-new schemas
// cannot grow it without end; past it, schemas are compiled per session.
const maxCachedSchemas = 4096

// compile returns the compiled schema for raw, from the cache when it can.
// Errors are not cached: they name the tool, which the text does not.
func (c *schemaCache) compile(tool, which string, raw json.RawMessage) (*schema, error) {
	if c == nil {
		return compileSchema(tool, which, raw)
	}
	key := which + "\x00" + string(raw)
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := compileSchema(tool, which, raw)
	if err != nil || s == nil {
		return s, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*schema{}
	}
	if len(c.m) < maxCachedSchemas {
		c.m[key] = s
	}
	return s, nil
}

// agentTools are an agent's tools, sorted by name, with their compiled
// schemas: a session looks one up at every call, and a few entries in a
// slice take a fraction of the room of a map (an idle session held two).
type agentTools []agentTool

type agentTool struct {
	decl    *AgentTool // into the agent config's Tools
	schemas toolSchemas
}

// find returns the tool named name, or nil.
func (ts agentTools) find(name string) *agentTool {
	i, ok := slices.BinarySearchFunc(ts, name, func(t agentTool, name string) int { return strings.Compare(t.decl.Name, name) })
	if !ok {
		return nil
	}
	return &ts[i]
}

// compileTools checks an agent config's tools and compiles their schemas
// once; the entries point into tools.
func compileTools(tools []AgentTool, cache *schemaCache) (agentTools, error) {
	out := make(agentTools, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for i := range tools {
		t := &tools[i]
		if t.Name == "" {
			return nil, fmt.Errorf("%w: tools[%d] has no name", ErrBadConfig, i)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: tool %q is declared twice", ErrBadConfig, t.Name)
		}
		seen[t.Name] = true
		if h := t.Handler; h != "" && h != HandlerWorker && h != HandlerClient {
			return nil, fmt.Errorf("%w: tool %q: handler %q is neither \"worker\" nor \"client\"", ErrBadConfig, t.Name, h)
		}
		if err := t.Retry.Validate(); err != nil {
			return nil, fmt.Errorf("%w: tool %q: %w", ErrBadConfig, t.Name, err)
		}
		in, err := cache.compile(t.Name, "input", t.Input)
		if err != nil {
			return nil, err
		}
		outS, err := cache.compile(t.Name, "output", t.Output)
		if err != nil {
			return nil, err
		}
		out = append(out, agentTool{decl: t, schemas: toolSchemas{input: in, output: outS}})
	}
	slices.SortFunc(out, func(a, b agentTool) int { return strings.Compare(a.decl.Name, b.decl.Name) })
	return out, nil
}

// classifyInput reads raw arguments and checks them against schema (nil:
// unchecked). It never mutates: Value is exactly the text that came in.
func classifyInput(raw string, sch *schema) ToolInput {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return ToolInput{Status: InputMalformed, Error: "the arguments are empty, not a JSON object"}
	}
	v, err := decodeJSON(trimmed)
	var dup duplicateMemberError
	if errors.As(err, &dup) {
		return ToolInput{Status: InputMalformed, Error: "in the arguments, " + dup.Error()}
	}
	if err != nil && JSONTooDeep([]byte(trimmed)) {
		return ToolInput{Status: InputMalformed, Error: fmt.Sprintf("the arguments nest arrays and objects more than %d deep, the most they may", MaxJSONDepth)}
	}
	if err != nil {
		return ToolInput{Status: InputMalformed, Error: "the arguments are not valid JSON: " + err.Error()}
	}
	if _, ok := v.(map[string]any); !ok {
		return ToolInput{Status: InputMalformed, Error: fmt.Sprintf("the arguments are a JSON %s, not an object", jsonKind(v))}
	}
	value := json.RawMessage(trimmed)
	if sch == nil {
		return ToolInput{Status: InputValid, Value: value}
	}
	if err := sch.Validate(v); err != nil {
		return ToolInput{Status: InputInvalid, Value: value, Error: schemaErrorText(err)}
	}
	return ToolInput{Status: InputValid, Value: value}
}

// checkOutput reads a result as JSON when it parses, else as a string, and
// checks it against sch. It returns "" when the result conforms.
func checkOutput(result string, sch *schema) string {
	if sch == nil {
		return ""
	}
	var v any = result
	parsed, err := decodeJSON(result)
	var dup duplicateMemberError
	switch {
	case err == nil:
		v = parsed
	case errors.As(err, &dup):
		// A schema cannot vouch for a value read two ways: it would
		// check the last copy, and the text passed on holds both.
		return "in the result, " + dup.Error()
	}
	if err := sch.Validate(v); err != nil {
		return schemaErrorText(err)
	}
	return ""
}

// resultText is the text a result settles with: a JSON string is its
// content, anything else its JSON text.
func resultText(result json.RawMessage) string {
	trimmed := bytes.TrimSpace(result)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err == nil {
			return s
		}
	}
	return string(trimmed)
}

// decodeJSON decodes one JSON value, keeping numbers exact, and refuses
// trailing data. quickJSON reads the usual values; encoding/json the rest,
// and says what is wrong with a value that is not JSON.
func decodeJSON(s string) (any, error) {
	if v, ok := quickJSON(s); ok {
		return v, nil
	}
	return decodeJSONStd(s)
}

// decodeJSONStd is decodeJSON by encoding/json alone: numbers kept exact,
// trailing data refused.
func decodeJSONStd(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	if name, ok := duplicateMember(s); ok {
		return nil, duplicateMemberError(name)
	}
	return v, nil
}

// duplicateMemberError: a JSON object gives a member twice. encoding/json
// (and JSON.parse) keep the last; a schema checked against that reading
// says nothing of the first, which the text passed on still holds.
type duplicateMemberError string

func (e duplicateMemberError) Error() string {
	return fmt.Sprintf("the member %.64q is given twice in one object", string(e))
}

// duplicateMember names a member that an object of the JSON text s, which
// decodes, gives twice.
func duplicateMember(s string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	// One entry an open array (nil) or object: its names so far, and
	// whether a name comes next.
	type object struct {
		names  map[string]bool
		atName bool
	}
	var open []*object
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, &object{names: map[string]bool{}, atName: true})
				continue
			case '[':
				open = append(open, nil)
				continue
			}
			open = open[:len(open)-1]
		case string:
			if n := len(open); n > 0 && open[n-1] != nil && open[n-1].atName {
				o := open[n-1]
				if o.names[t] {
					return t, true
				}
				o.names[t], o.atName = true, false
				continue
			}
		}
		// A value ended: in an object, a name comes next.
		if n := len(open); n > 0 && open[n-1] != nil {
			open[n-1].atName = true
		}
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// schemaErrorText turns a validation error into one line naming each failing
// path, for the model to read: `at /city: expected string, but got number`.
func schemaErrorText(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		var se *jsonschema.SchemaError
		if errors.As(err, &se) && se.Err != nil {
			return schemaErrorText(se.Err)
		}
		return err.Error()
	}
	var leaves []string
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			line := "at " + loc + ": " + e.Message
			if !seen[line] {
				seen[line] = true
				leaves = append(leaves, line)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	return strings.Join(leaves, "; ")
}

// inputType is the "type" of an input schema when it does not allow an
// object, as JSON text ("string", ["array","null"]); "" when it does, or
// says nothing of it, or is not one compile takes (which says why).
func inputType(raw json.RawMessage) string {
	var schema map[string]json.RawMessage // not a struct: a keyword's case counts
	if json.Unmarshal(raw, &schema) != nil || schema["type"] == nil {
		return ""
	}
	var types []string
	if json.Unmarshal(schema["type"], &types) != nil {
		var one string
		if json.Unmarshal(schema["type"], &one) != nil {
			return ""
		}
		types = []string{one}
	}
	for _, t := range types {
		switch t {
		case "string", "number", "integer", "boolean", "array", "null":
		default: // "object", or no type at all
			return ""
		}
	}
	if len(types) == 0 {
		return ""
	}
	return string(schema["type"])
}
