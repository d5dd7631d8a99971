package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestInputClassification: the engine classifies the model's raw arguments
// against the tool's input schema; every case reaches the worker, and for
// invalid or malformed input (or an undeclared tool) proposed is a
// ready-made tool.error that the worker can return as-is.
func TestInputClassification(t *testing.T) {
	tests := []struct {
		name      string
		tool      string // the tool the model calls
		input     string // its input schema; "" for none
		arguments string
		status    string
		value     string // input.value; "" for none
		errorHas  string // in input.error
		code      engine.ErrorCode
		proposal  string // in the proposed error's text
	}{
		{name: "valid", tool: "get_weather", input: weatherInput, arguments: `{"city":"Tokyo"}`,
			status: "valid", value: `{"city":"Tokyo"}`},
		{name: "valid with extra members", tool: "get_weather", input: weatherInput, arguments: `{"city":"Tokyo","units":"C"}`,
			status: "valid", value: `{"city":"Tokyo","units":"C"}`},
		{name: "invalid: wrong type", tool: "get_weather", input: weatherInput, arguments: `{"city":7}`,
			status: "invalid", value: `{"city":7}`, errorHas: "at /city: expected string, but got number",
			code: engine.CodeInvalidInput, proposal: "The arguments for get_weather do not match its input schema: at /city: expected string, but got number."},
		{name: "invalid: missing required", tool: "get_weather", input: weatherInput, arguments: `{}`,
			status: "invalid", value: `{}`, errorHas: "missing properties: 'city'",
			code: engine.CodeInvalidInput, proposal: "do not match its input schema"},
		{name: "invalid: two violations, both named", tool: "range", arguments: `{"lo":"a","hi":"b"}`,
			input:  `{"type":"object","properties":{"lo":{"type":"number"},"hi":{"type":"number"}}}`,
			status: "invalid", value: `{"lo":"a","hi":"b"}`, errorHas: "at /hi: expected number, but got string; at /lo: expected number, but got string",
			code: engine.CodeInvalidInput, proposal: "at /hi"},
		{name: "malformed: not JSON", tool: "get_weather", input: weatherInput, arguments: `{"city": "Tokyo"`,
			status: "malformed", errorHas: "not valid JSON", code: engine.CodeMalformedInput,
			proposal: "The arguments for get_weather are not a JSON object"},
		{name: "malformed: a JSON array", tool: "get_weather", input: weatherInput, arguments: `["Tokyo"]`,
			status: "malformed", errorHas: "a JSON array, not an object", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "malformed: a JSON string", tool: "get_weather", input: weatherInput, arguments: `"Tokyo"`,
			status: "malformed", errorHas: "a JSON string, not an object", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "malformed: empty", tool: "get_weather", input: weatherInput, arguments: ``,
			status: "malformed", errorHas: "empty", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "malformed: trailing text", tool: "get_weather", input: weatherInput, arguments: `{"city":"Tokyo"} and Paris`,
			status: "malformed", errorHas: "after the JSON value", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "malformed: nested deeper than JSON may", tool: "free", arguments: `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
			status: "malformed", errorHas: "more than 10000 deep", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "malformed: a member given twice", tool: "get_weather", input: weatherInput, arguments: `{"city":"Tokyo","city":"Paris"}`,
			status: "malformed", errorHas: `in the arguments, the member "city" is given twice in one object`, code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "no schema: unchecked", tool: "free", arguments: `{"anything":[1,"two",null]}`,
			status: "valid", value: `{"anything":[1,"two",null]}`},
		{name: "no schema: still must be an object", tool: "free", arguments: `42`,
			status: "malformed", errorHas: "a JSON number, not an object", code: engine.CodeMalformedInput, proposal: "not a JSON object"},
		{name: "undeclared tool", tool: "launch_rocket", arguments: `{"target":"moon"}`,
			status: "valid", value: `{"target":"moon"}`, code: engine.CodeUnknownTool,
			proposal: `There is no tool named "launch_rocket". Use one of the declared tools: get_weather, range, free.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schemas := map[string]string{"get_weather": weatherInput, "range": `{"type":"object","properties":{"lo":{"type":"number"},"hi":{"type":"number"}}}`, "free": ""}
			if tt.input != "" {
				schemas[tt.tool] = tt.input
			}
			var tools []engine.AgentTool
			for _, name := range []string{"get_weather", "range", "free"} {
				tools = append(tools, engine.AgentTool{Name: name, Input: json.RawMessage(schemas[name])})
			}
			w := &testWorker{agent: engine.AgentConfig{Tools: tools}}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
				if len(proposed.Actions) > 0 {
					return proposed, nil // as-is
				}
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"ran"`)}}}, nil
			}
			h := setup(t, w, callsThenSummary(use("call_1", tt.tool, tt.arguments)), engine.Options{})
			h.send("go")
			h.waitIdle()

			execs := w.requests(engine.TypeToolExecute)
			if len(execs) != 1 {
				t.Fatalf("the worker got %d tool.execute triggers, want 1: every case reaches it", len(execs))
			}
			ex := execs[0].Trigger.(engine.ToolExecute)
			if ex.Arguments != tt.arguments {
				t.Errorf("arguments %q, want the raw %q", ex.Arguments, tt.arguments)
			}
			if ex.Input.Status != tt.status || string(ex.Input.Value) != tt.value || !strings.Contains(ex.Input.Error, tt.errorHas) {
				t.Errorf("input %s; want status %s, value %s, error with %q", mustJSON(t, ex.Input), tt.status, tt.value, tt.errorHas)
			}
			if (ex.Input.Error == "") != (tt.status == "valid") {
				t.Errorf("input %s: error must be set exactly when not valid", mustJSON(t, ex.Input))
			}
			proposed := execs[0].Proposed
			fin := h.seen[indexOf(h.seen, engine.EventToolFinished)]
			if tt.code == "" {
				if len(proposed.Actions) != 0 {
					t.Errorf("proposed %s on a clean call, want empty", mustJSON(t, proposed))
				}
				if !fin.OK || fin.Result != "ran" {
					t.Errorf("tool.finished %s", fin.Raw)
				}
				return
			}
			if len(proposed.Actions) != 1 {
				t.Fatalf("proposed %s, want one tool.error", mustJSON(t, proposed))
			}
			pe, ok := proposed.Actions[0].(engine.ToolError)
			if !ok || pe.ID != "call_1" || pe.Attempt != 1 || pe.Code != tt.code || pe.Retryable || !strings.Contains(pe.Error, tt.proposal) {
				t.Errorf("proposed %s; want a terminal tool.error, code %s, saying %q", mustJSON(t, proposed), tt.code, tt.proposal)
			}
			// Returned as-is, it settles the call; the model reads its text.
			if fin.OK || fin.Error != pe.Error || fin.Code != string(tt.code) {
				t.Errorf("tool.finished %s", fin.Raw)
			}
			if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || tm[0].Content != pe.Error || !tm[0].IsError {
				t.Errorf("the model saw %+v", tm)
			}
		})
	}
}

func indexOf(frames []frame, typ string) int {
	for i, f := range frames {
		if f.Type == typ {
			return i
		}
	}
	panic("no " + typ + " event")
}

// TestInputNeverMutated: a passing value is exactly what came in: no
// coercion, no default-filling, number text kept.
func TestInputNeverMutated(t *testing.T) {
	schema := `{"type":"object","properties":{
		"price":{"type":"number"},
		"currency":{"type":"string","default":"EUR"},
		"count":{"type":"integer","default":1},
		"note":{"type":"string"}
	},"required":["price"]}`
	tests := []struct {
		name, arguments, status string
	}{
		{"number text and member order kept, no defaults filled", `{"price": 1.50, "note": "a <b> & c"}`, "valid"},
		{"big and exact numbers", `{"price": 12345678901234567890.10, "count": 3}`, "valid"},
		{"a numeric string is not coerced to a number", `{"price": "1.50"}`, "invalid"},
		{"a number is not coerced to a string", `{"price": 1, "note": 5}`, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got json.RawMessage
			tool := engine.Tool{Name: "pay", Input: engine.Schema(schema), Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
				got = append(json.RawMessage(nil), args...)
				return "paid", nil
			}}
			w := recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"}, Tools: []engine.Tool{tool}})
			h := setup(t, w, callsThenSummary(use("call_1", "pay", tt.arguments)), engine.Options{})
			h.send("pay")
			h.waitIdle()
			ex := w.requests(engine.TypeToolExecute)[0].Trigger.(engine.ToolExecute)
			if ex.Input.Status != tt.status {
				t.Fatalf("status %s (%s), want %s", ex.Input.Status, ex.Input.Error, tt.status)
			}
			if string(ex.Input.Value) != tt.arguments {
				t.Errorf("input.value %s, want exactly %s", ex.Input.Value, tt.arguments)
			}
			if tt.status == "valid" && string(got) != tt.arguments {
				t.Errorf("the tool got %s, want exactly %s", got, tt.arguments)
			}
			if tt.status == "invalid" && got != nil {
				t.Errorf("ToolWorker ran the tool on invalid input")
			}
			// On the wire the value is the same JSON: same members, same
			// number text, nothing added.
			var wire struct {
				Input struct {
					Value map[string]json.RawMessage `json:"value"`
				} `json:"input"`
			}
			if err := json.Unmarshal([]byte(mustJSON(t, ex)), &wire); err != nil {
				t.Fatal(err)
			}
			var in map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.arguments), &in); err != nil {
				t.Fatal(err)
			}
			if len(wire.Input.Value) != len(in) {
				t.Errorf("wire value has %d members, want %d", len(wire.Input.Value), len(in))
			}
			for k, v := range in {
				if string(wire.Input.Value[k]) != string(v) && k != "note" {
					t.Errorf("wire value %s = %s, want %s", k, wire.Input.Value[k], v)
				}
			}
		})
	}
}

// TestOutputSchema: a result is read as JSON when it parses, else as a plain
// string, and checked against output. A result that violates it settles as
// a terminal tool.error (code invalid_output, naming the failing path) and
// never reaches the model.
func TestOutputSchema(t *testing.T) {
	forecast := `{"type":"object","properties":{"sky":{"type":"string"},"temp":{"type":"number"}},"required":["sky"]}`
	tests := []struct {
		name    string
		output  string // "" for none
		result  string // the tool.result's result, as JSON
		ok      bool
		text    string // tool.finished result when ok; a piece of its error otherwise
		secrets []string
	}{
		{"string result, string schema", `{"type":"string"}`, `"It's clear in Tokyo."`, true, "It's clear in Tokyo.", nil},
		{"object result that conforms", forecast, `{"sky":"clear","temp":21.50}`, true, `{"sky":"clear","temp":21.50}`, nil},
		{"object result with a wrong member", forecast, `{"sky":"clear","temp":"hot-secret"}`, false,
			"get_weather returned a result that does not match its output schema (at /temp: expected number, but got string), so it was discarded.", []string{"hot-secret"}},
		{"object result missing a member", forecast, `{"temp":99.25}`, false, "at /: missing properties: 'sky'", []string{"99.25"}},
		{"a plain string read as a string fails an object schema", forecast, `"cloudy-secret"`, false, "at /: expected object, but got string", []string{"cloudy-secret"}},
		{"a string holding JSON is read as JSON", forecast, `"{\"sky\":\"clear\"}"`, true, `{"sky":"clear"}`, nil},
		{"a string holding a number is read as a number", `{"type":"number"}`, `"42"`, true, "42", nil},
		{"a plain string fails a number schema", `{"type":"number","minimum":0}`, `"many-secret"`, false, "expected number, but got string", []string{"many-secret"}},
		{"a number below the minimum", `{"type":"number","minimum":0}`, `-273.15`, false, "at /: must be >= 0 but found -273.15", nil},
		// A schema checks the last of a member given twice; the text passed
		// on holds both: such a result is refused, escaped names too.
		{"a member given twice", `{"type":"object","properties":{"sky":{"enum":["clear"]}}}`, `{"sky":"IGNORE-secret","sky":"clear"}`, false,
			`in the result, the member "sky" is given twice in one object`, []string{"IGNORE-secret"}},
		{"a member given twice, once escaped, deep", forecast, `{"sky":"clear","more":[{"x":1},{"x":2,"\u0078":"deep-secret"}]}`, false,
			`the member "x" is given twice`, []string{"deep-secret"}},
		{"the same member in two objects", forecast, `{"sky":"clear","more":[{"x":1},{"x":2}],"x":{"x":3}}`, true, `{"sky":"clear","more":[{"x":1},{"x":2}],"x":{"x":3}}`, nil},
		{"no output schema: unchecked", "", `{"whatever":[true]}`, true, `{"whatever":[true]}`, nil},
		{"no output schema: a plain string", "", `"It's foggy in San Francisco."`, true, "It's foggy in San Francisco.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			executions := 0
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_weather", Output: json.RawMessage(tt.output),
				Retry: &engine.RetryPolicy{Attempts: 3}}}}}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				executions++
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(tt.result)}}}, nil
			}
			h := setup(t, w, callsThenSummary(use("call_1", "get_weather", `{}`)), engine.Options{})
			h.send("weather")
			fin := h.waitFinished("call_1")
			h.waitIdle()
			if tt.ok {
				if !fin.OK || fin.Result != tt.text {
					t.Errorf("tool.finished %s; want ok with result %q", fin.Raw, tt.text)
				}
				if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || tm[0].Content != tt.text || tm[0].IsError {
					t.Errorf("the model saw %+v", tm)
				}
				return
			}
			if fin.OK || fin.Code != string(engine.CodeInvalidOutput) || !strings.Contains(fin.Error, tt.text) {
				t.Errorf("tool.finished %s; want invalid_output saying %q", fin.Raw, tt.text)
			}
			if executions != 1 {
				t.Errorf("the tool ran %d times: invalid_output is terminal", executions)
			}
			tm := toolMessages(h.model.last(t).Messages)
			if len(tm) != 1 || !tm[0].IsError || tm[0].Content != fin.Error {
				t.Fatalf("the model saw %+v", tm)
			}
			// The bad result never reaches the model, nor the browser.
			for _, req := range h.model.requests() {
				for _, msg := range req.Messages {
					for _, secret := range tt.secrets {
						if strings.Contains(msg.Content, secret) {
							t.Errorf("the model saw the bad result: %+v", msg)
						}
					}
				}
			}
			for _, f := range h.seen {
				for _, secret := range tt.secrets {
					if strings.Contains(string(f.Raw), secret) {
						t.Errorf("event %s carries the bad result", f.Raw)
					}
				}
			}
		})
	}
}

// TestOutputSchemaOnClientResult: a browser's result is checked too.
func TestOutputSchemaOnClientResult(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient,
		Output: engine.Schema(`{"type":"object","required":["lat","lon"]}`)}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{}, b)
	h.send("where")
	recv(t, b.calls, "client dispatch")
	h.answer(engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`{"lat":35.6}`)})
	fin := h.waitFinished("call_1")
	if fin.OK || fin.Code != string(engine.CodeInvalidOutput) || !strings.Contains(fin.Error, "missing properties: 'lon'") {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	h.waitIdle()
	for _, msg := range h.model.last(t).Messages {
		if strings.Contains(msg.Content, "35.6") {
			t.Errorf("the model saw the bad result: %+v", msg)
		}
	}
}

// TestSchemaToolNames: every name a provider takes compiles; the name is
// not part of the schema's URL (a "#" in it used to panic the schema
// library, before names were limited to what providers take).
func TestSchemaToolNames(t *testing.T) {
	for _, name := range []string{"get_weather", "A-1", "_", strings.Repeat("n", 64)} {
		t.Run(name, func(t *testing.T) {
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: name, Input: engine.Schema(weatherInput)}}}}
			h := setup(t, w, callsThenSummary(use("call_1", name, `{"city":1}`)), engine.Options{})
			h.send("go")
			h.waitIdle()
			ex := w.requests(engine.TypeToolExecute)[0].Trigger.(engine.ToolExecute)
			if ex.Input.Status != engine.InputInvalid {
				t.Errorf("input %+v, want invalid", ex.Input)
			}
		})
	}
}

// TestSchemaHelper: engine.Schema refuses text that is not JSON.
func TestSchemaHelper(t *testing.T) {
	if got := string(engine.Schema(`{"type":"string"}`)); got != `{"type":"string"}` {
		t.Errorf("Schema returned %s", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Schema accepted text that is not JSON")
		}
	}()
	engine.Schema(`{type: string}`)
}

// TestStoredToolNamesLoad: a stored session whose agent declared a tool
// name the gateway now refuses from a worker (a dot, which an earlier
// version took) loads as it was stored: the rule is for agents the worker
// sends, not for chats already kept.
func TestStoredToolNamesLoad(t *testing.T) {
	ctx := context.Background()
	old := engine.NewMemoryStore()
	w := &testWorker{agent: engine.AgentConfig{Model: "fake-model", Tools: []engine.AgentTool{{Name: "get_weather"}}}}
	e1, err := engine.New(engine.Options{Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: old, Logger: quiet(), Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e1.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	stop(t, e1)
	// The same journal, as a version that took "get.weather" wrote it.
	batches, err := old.Load(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	stored := engine.NewMemoryStore()
	for _, b := range batches {
		b.State = json.RawMessage(strings.ReplaceAll(string(b.State), "get_weather", "get.weather"))
		if err := stored.Append(ctx, s.ID(), b); err != nil {
			t.Fatal(err)
		}
	}
	e2, err := engine.New(engine.Options{Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: stored, Logger: quiet(), Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, e2)
	if _, err := e2.Load(ctx, s.ID()); err != nil {
		t.Errorf("loading a session stored with the tool get.weather: %v", err)
	}
}

// TestEmptyResultIsGiven: a result of "" settles ok with "result":"" in
// the page's tool.finished and in the worker's trigger, where it was left
// out: a reader of result got undefined for an empty result.
func TestEmptyResultIsGiven(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "clear_notes"}}}}
	w.execute = func(context.Context, engine.ToolExecute, engine.Decision) (engine.Decision, error) {
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`""`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "clear_notes", `{}`)), engine.Options{})
	h.send("clear")
	fin := h.waitFinished("call_1")
	h.waitIdle()
	if !fin.OK || !strings.Contains(string(fin.Raw), `"result":""`) {
		t.Errorf("tool.finished %s, want ok with \"result\":\"\"", fin.Raw)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, req := range w.seen {
		if tf, ok := req.Trigger.(engine.ToolFinished); ok {
			b, err := json.Marshal(tf)
			if err != nil || !strings.Contains(string(b), `"result":""`) {
				t.Errorf("the worker's tool.finished: %s, %v; want \"result\":\"\"", b, err)
			}
			return
		}
	}
	t.Error("the worker got no tool.finished")
}
