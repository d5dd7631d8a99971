package engine_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// The golden JSON below spells every field as the seed (tool-calls.md) does:
// ToolExecute, ToolInput, ToolFinished, ToolCall, ToolResult, ToolError,
// AgentTool, RetryPolicy. Encoding a value must give exactly the golden text
// ("type" first), and decoding the golden must give the value back.

func TestGoldenTriggers(t *testing.T) {
	tests := []struct {
		name    string
		trigger engine.Trigger
		golden  string
	}{
		{"session.start", engine.SessionStart{Session: "s1"},
			`{"type":"session.start","session":"s1"}`},
		{"message", engine.UserMessage{Message: model.Message{Role: "user", Content: "What's the weather in Tokyo?"}},
			`{"type":"message","message":{"role":"user","content":"What's the weather in Tokyo?"}}`},
		{"model.finished with a tool use", engine.ModelFinished{
			Message:    model.Message{Role: "assistant", ToolUses: []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`}}},
			StopReason: "tool_use", Usage: model.Usage{InputTokens: 12, OutputTokens: 7}},
			`{"type":"model.finished","message":{"role":"assistant","toolUses":[{"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}]},"stopReason":"tool_use","usage":{"inputTokens":12,"outputTokens":7}}`},
		{"tool.execute valid", engine.ToolExecute{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`,
			Input:   engine.ToolInput{Status: "valid", Value: json.RawMessage(`{"city":"Tokyo"}`)},
			Attempt: 1, Deadline: "2026-01-02T03:09:05.000Z"},
			`{"type":"tool.execute","id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}","input":{"status":"valid","value":{"city":"Tokyo"}},"attempt":1,"deadline":"2026-01-02T03:09:05.000Z"}`},
		{"tool.execute invalid", engine.ToolExecute{ID: "call_2", Name: "get_weather", Arguments: `{"city":7}`,
			Input:   engine.ToolInput{Status: "invalid", Value: json.RawMessage(`{"city":7}`), Error: "at /city: expected string, but got number"},
			Attempt: 2, Deadline: "2026-01-02T03:09:05.000Z"},
			`{"type":"tool.execute","id":"call_2","name":"get_weather","arguments":"{\"city\":7}","input":{"status":"invalid","value":{"city":7},"error":"at /city: expected string, but got number"},"attempt":2,"deadline":"2026-01-02T03:09:05.000Z"}`},
		{"tool.execute malformed, no deadline", engine.ToolExecute{ID: "call_3", Name: "get_weather", Arguments: `Tokyo`,
			Input:   engine.ToolInput{Status: "malformed", Error: "the arguments are not valid JSON"},
			Attempt: 1},
			`{"type":"tool.execute","id":"call_3","name":"get_weather","arguments":"Tokyo","input":{"status":"malformed","error":"the arguments are not valid JSON"},"attempt":1}`},
		{"tool.finished ok", engine.ToolFinished{ID: "call_1", OK: true, Name: "get_weather", Result: "It's clear in Tokyo."},
			`{"type":"tool.finished","id":"call_1","ok":true,"name":"get_weather","result":"It's clear in Tokyo."}`},
		{"tool.finished error", engine.ToolFinished{ID: "call_4", OK: false, Name: "get_weather", Error: "No forecast for Paris."},
			`{"type":"tool.finished","id":"call_4","ok":false,"name":"get_weather","error":"No forecast for Paris."}`},
		{"session.end", engine.SessionEnd{Reason: "shutdown"},
			`{"type":"session.end","reason":"shutdown"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.trigger)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.golden {
				t.Errorf("encode:\n got %s\nwant %s", got, tt.golden)
			}
			back, err := engine.DecodeTrigger([]byte(tt.golden))
			if err != nil {
				t.Fatalf("DecodeTrigger: %v", err)
			}
			if !reflect.DeepEqual(back, tt.trigger) {
				t.Errorf("decode:\n got %#v\nwant %#v", back, tt.trigger)
			}
			if back.TriggerType() != tt.trigger.TriggerType() {
				t.Errorf("TriggerType %q, want %q", back.TriggerType(), tt.trigger.TriggerType())
			}
		})
	}
}

func TestGoldenActions(t *testing.T) {
	tests := []struct {
		name   string
		action engine.Action
		golden string
	}{
		{"tool.call, every field", engine.ToolCall{ID: "call_9", Name: "get_location", Arguments: json.RawMessage(`{"precise":true}`),
			Handler: engine.HandlerClient,
			Retry:   &engine.RetryPolicy{Attempts: 3, Timeout: "30s", Backoff: "1s", Multiplier: 2, MaxBackoff: "30s"}},
			`{"type":"tool.call","id":"call_9","name":"get_location","arguments":{"precise":true},"handler":"client","retry":{"attempts":3,"timeout":"30s","backoff":"1s","multiplier":2,"maxBackoff":"30s"}}`},
		{"tool.call, id minted by the engine", engine.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Tokyo"}`)},
			`{"type":"tool.call","name":"get_weather","arguments":{"city":"Tokyo"}}`},
		{"tool.call, the model's raw argument string", engine.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Tokyo\"}"`), Handler: engine.HandlerWorker},
			`{"type":"tool.call","id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}","handler":"worker"}`},
		{"tool.result, defaults to the answered trigger", engine.ToolResult{Result: json.RawMessage(`"It's clear in Tokyo."`)},
			`{"type":"tool.result","result":"It's clear in Tokyo."}`},
		{"tool.result, every field", engine.ToolResult{ID: "call_1", Attempt: 2, Result: json.RawMessage(`{"sky":"clear"}`)},
			`{"type":"tool.result","id":"call_1","attempt":2,"result":{"sky":"clear"}}`},
		{"tool.error, terminal by default", engine.ToolError{Error: "No forecast for Paris."},
			`{"type":"tool.error","error":"No forecast for Paris."}`},
		{"tool.error, every field", engine.ToolError{ID: "call_1", Attempt: 1, Error: "The forecast service is busy.", Retryable: true,
			Code: engine.CodeToolFailed, Detail: json.RawMessage(`{"status":503}`)},
			`{"type":"tool.error","id":"call_1","attempt":1,"error":"The forecast service is busy.","retryable":true,"code":"tool_failed","detail":{"status":503}}`},
		{"message.append", engine.MessageAppend{Message: model.Message{Role: "tool", Content: "It's clear in Tokyo.", ToolUseID: "call_1", Name: "get_weather"}},
			`{"type":"message.append","message":{"role":"tool","content":"It's clear in Tokyo.","toolUseId":"call_1","name":"get_weather"}}`},
		{"model.prompt", engine.ModelPrompt{}, `{"type":"model.prompt"}`},
		{"hold", engine.Hold{}, `{"type":"hold"}`},
		{"session.end", engine.EndSession{Reason: "done"}, `{"type":"session.end","reason":"done"}`},
		{"client.event", engine.ClientEvent{Name: "confetti", Data: json.RawMessage(`{"n":3}`)},
			`{"type":"client.event","name":"confetti","data":{"n":3}}`},
		{"tool.delegate, defaults to the answered trigger and its arguments", engine.ToolDelegate{Agent: engine.AgentConfig{Model: "scripted",
			Tools: []engine.AgentTool{{Name: "get_weather"}}}},
			`{"type":"tool.delegate","agent":{"model":"scripted","tools":[{"name":"get_weather"}]}}`},
		{"tool.delegate, every field", engine.ToolDelegate{ID: "call_1", Attempt: 2, Agent: engine.AgentConfig{Model: "scripted", System: "Research."},
			Message: "Research Tokyo."},
			`{"type":"tool.delegate","id":"call_1","attempt":2,"agent":{"model":"scripted","system":"Research."},"message":"Research Tokyo."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.action)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.golden {
				t.Errorf("encode:\n got %s\nwant %s", got, tt.golden)
			}
			back, err := engine.DecodeAction([]byte(tt.golden))
			if err != nil {
				t.Fatalf("DecodeAction: %v", err)
			}
			if !reflect.DeepEqual(back, tt.action) {
				t.Errorf("decode:\n got %#v\nwant %#v", back, tt.action)
			}
		})
	}
}

func TestGoldenDecisions(t *testing.T) {
	weather := engine.AgentTool{Name: "get_weather", Description: "Get the weather for a city.", Input: json.RawMessage(weatherInput)}
	tests := []struct {
		name     string
		decision engine.Decision
		golden   string
	}{
		{"empty: the proposal on a clean tool.execute", engine.Decision{}, `{}`},
		{"the seed's session.start answer", engine.Decision{Agent: &engine.AgentConfig{Model: "claude-haiku-4-5-20251001", Stream: true, Tools: []engine.AgentTool{weather}}},
			`{"agent":{"model":"claude-haiku-4-5-20251001","stream":true,"tools":[{"name":"get_weather","description":"Get the weather for a city.","input":` + weatherInput + `}]}}`},
		{"the seed's tool.execute answer", engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"It's clear in Tokyo."`)}}},
			`{"actions":[{"type":"tool.result","result":"It's clear in Tokyo."}]}`},
		{"several actions", engine.Decision{Actions: []engine.Action{
			engine.MessageAppend{Message: model.Message{Role: "user", Content: "hi"}}, engine.ModelPrompt{}}},
			`{"actions":[{"type":"message.append","message":{"role":"user","content":"hi"}},{"type":"model.prompt"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.decision)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.golden {
				t.Errorf("encode:\n got %s\nwant %s", got, tt.golden)
			}
			var back engine.Decision
			if err := json.Unmarshal([]byte(tt.golden), &back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(back, tt.decision) {
				t.Errorf("decode:\n got %#v\nwant %#v", back, tt.decision)
			}
		})
	}
}

func TestGoldenAgentTool(t *testing.T) {
	tool := engine.AgentTool{
		Name:        "get_location",
		Description: "Where the user is.",
		Input:       json.RawMessage(`{"type":"object"}`),
		Output:      json.RawMessage(`{"type":"object","required":["lat","lon"]}`),
		Handler:     engine.HandlerClient,
		Retry:       &engine.RetryPolicy{Attempts: 3, Timeout: "10s"},
	}
	golden := `{"name":"get_location","description":"Where the user is.","input":{"type":"object"},"output":{"type":"object","required":["lat","lon"]},"handler":"client","retry":{"attempts":3,"timeout":"10s"}}`
	got, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != golden {
		t.Errorf("encode:\n got %s\nwant %s", got, golden)
	}
	var back engine.AgentTool
	if err := json.Unmarshal([]byte(golden), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tool) {
		t.Errorf("decode:\n got %#v\nwant %#v", back, tool)
	}
	// Only name is required: input, output and handler may be omitted.
	minimal := `{"name":"get_time"}`
	if got := mustJSON(t, engine.AgentTool{Name: "get_time"}); got != minimal {
		t.Errorf("minimal encode: got %s, want %s", got, minimal)
	}
}

func TestGoldenDecideRequest(t *testing.T) {
	req := engine.DecideRequest{
		Session: "s1",
		Trigger: engine.ToolFinished{ID: "call_1", OK: true, Name: "get_weather", Result: "It's clear in Tokyo."},
		Proposed: engine.Decision{Actions: []engine.Action{
			engine.MessageAppend{Message: model.Message{Role: "tool", Content: "It's clear in Tokyo.", ToolUseID: "call_1", Name: "get_weather"}},
			engine.ModelPrompt{},
		}},
	}
	golden := `{"session":"s1","trigger":{"type":"tool.finished","id":"call_1","ok":true,"name":"get_weather","result":"It's clear in Tokyo."},"proposed":{"actions":[{"type":"message.append","message":{"role":"tool","content":"It's clear in Tokyo.","toolUseId":"call_1","name":"get_weather"}},{"type":"model.prompt"}]}}`
	if got := mustJSON(t, req); got != golden {
		t.Errorf("encode:\n got %s\nwant %s", got, golden)
	}
	var back engine.DecideRequest
	if err := json.Unmarshal([]byte(golden), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, req) {
		t.Errorf("decode:\n got %#v\nwant %#v", back, req)
	}
}

// TestGoldenDecideRequestOfASubAgent: a sub-agent's triggers name the call
// it answers.
func TestGoldenDecideRequestOfASubAgent(t *testing.T) {
	req := engine.DecideRequest{
		Session:  "s1",
		Trigger:  engine.UserMessage{Message: model.Message{Role: "user", Content: `{"city":"Tokyo"}`}},
		Proposed: engine.Decision{Actions: []engine.Action{engine.ModelPrompt{}}},
		Parent:   &engine.ParentCall{ID: "call_1", Name: "research", Attempt: 1, Depth: 1},
	}
	golden := `{"session":"s1","trigger":{"type":"message","message":{"role":"user","content":"{\"city\":\"Tokyo\"}"}},"proposed":{"actions":[{"type":"model.prompt"}]},"parent":{"id":"call_1","name":"research","attempt":1,"depth":1}}`
	if got := mustJSON(t, req); got != golden {
		t.Errorf("encode:\n got %s\nwant %s", got, golden)
	}
	var back engine.DecideRequest
	if err := json.Unmarshal([]byte(golden), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, req) {
		t.Errorf("decode:\n got %#v\nwant %#v", back, req)
	}
	if _, err := engine.DecodeAction([]byte(`{"type":"tool.delegate","agent":{}}`)); err == nil || !strings.Contains(err.Error(), "agent.model") {
		t.Errorf("a tool.delegate without a model: %v, want an error naming agent.model", err)
	}
}

func TestGoldenDeliveries(t *testing.T) {
	call := engine.ClientCall{ID: "call_1", Name: "get_location", Arguments: `{}`,
		Input: engine.ToolInput{Status: "valid", Value: json.RawMessage(`{}`)}, Attempt: 2, Attempts: 3,
		Deadline: "2026-01-02T03:04:35.000Z"}
	golden := `{"type":"tool.call","id":"call_1","name":"get_location","arguments":"{}","input":{"status":"valid","value":{}},"attempt":2,"attempts":3,"deadline":"2026-01-02T03:04:35.000Z"}`
	if got := frameOf(t, engine.FrameToolCall, call); got != golden {
		t.Errorf("tool.call frame:\n got %s\nwant %s", got, golden)
	}
	call.Input = engine.ToolInput{Status: "malformed", Error: "the arguments are not valid JSON"}
	call.Proposed = &engine.ToolError{ID: "call_1", Attempt: 2, Error: "Bad arguments.", Code: engine.CodeMalformedInput}
	golden = `{"type":"tool.call","id":"call_1","name":"get_location","arguments":"{}","input":{"status":"malformed","error":"the arguments are not valid JSON"},"attempt":2,"attempts":3,"deadline":"2026-01-02T03:04:35.000Z","proposed":{"type":"tool.error","id":"call_1","attempt":2,"error":"Bad arguments.","code":"malformed_input"}}`
	if got := frameOf(t, engine.FrameToolCall, call); got != golden {
		t.Errorf("tool.call frame with proposed:\n got %s\nwant %s", got, golden)
	}
	call = engine.ClientCall{ID: "call_2", Name: "get_location", Arguments: `{}`,
		Input: engine.ToolInput{Status: "valid", Value: json.RawMessage(`{}`)}, Attempt: 1, Attempts: 1,
		Deadline: "2026-01-02T03:04:35.000Z", Parent: "call_1"}
	golden = `{"type":"tool.call","id":"call_2","name":"get_location","arguments":"{}","input":{"status":"valid","value":{}},"attempt":1,"attempts":1,"deadline":"2026-01-02T03:04:35.000Z","parent":"call_1"}`
	if got := frameOf(t, engine.FrameToolCall, call); got != golden {
		t.Errorf("tool.call frame of a sub-agent:\n got %s\nwant %s", got, golden)
	}
	cancel := engine.ToolCancelFrame{ID: "call_1", Attempt: 2, Reason: "timed out"}
	golden = `{"type":"tool.cancel","id":"call_1","attempt":2,"reason":"timed out"}`
	if got := frameOf(t, engine.FrameToolCancel, cancel); got != golden {
		t.Errorf("tool.cancel frame:\n got %s\nwant %s", got, golden)
	}
	opened := engine.SessionOpenedFrame{Session: "s1", Seq: 7, Page: "page_1"}
	golden = `{"type":"session.opened","session":"s1","seq":7,"page":"page_1"}`
	if got := frameOf(t, engine.FrameSessionOpened, opened); got != golden {
		t.Errorf("session.opened frame:\n got %s\nwant %s", got, golden)
	}
}

// frameOf encodes a page's own frame as the engine puts it on the stream.
func frameOf(t *testing.T, typ string, v any) string {
	t.Helper()
	b, err := engine.EncodeFrame(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeBadInput: what cannot be decoded is a clear error, never a
// half-filled value.
func TestDecodeBadInput(t *testing.T) {
	tests := []struct {
		name   string
		decode func([]byte) error
		input  string
		want   string // in the error text
	}{
		{"action of unknown type", decodeAction, `{"type":"tool.explode","id":"call_1"}`, `unknown type "tool.explode"`},
		{"action without type", decodeAction, `{"id":"call_1","result":1}`, `missing "type"`},
		{"action with empty type", decodeAction, `{"type":""}`, `missing "type"`},
		{"action that is not an object", decodeAction, `[1,2]`, `not a JSON object`},
		{"action that is not JSON", decodeAction, `{"type":`, `not a JSON object`},
		{"tool.call without name", decodeAction, `{"type":"tool.call","arguments":{}}`, `missing "name"`},
		{"tool.call with a retry of the wrong shape", decodeAction, `{"type":"tool.call","name":"x","retry":{"attempts":"3"}}`, `failed to decode tool.call action`},
		{"tool.result without result", decodeAction, `{"type":"tool.result","id":"call_1"}`, `missing "result"`},
		{"tool.error without error", decodeAction, `{"type":"tool.error","id":"call_1"}`, `missing "error"`},
		{"tool.error with an attempt that is not a number", decodeAction, `{"type":"tool.error","error":"x","attempt":"1"}`, `failed to decode tool.error action`},
		{"tool.error with an empty id", decodeAction, `{"type":"tool.error","error":"","id":""}`, `"id" is empty: leave it out`},
		{"tool.delegate for attempt 0", decodeAction, `{"type":"tool.delegate","attempt":0,"agent":{"model":"m"}}`, `"attempt" is 0: attempts count from 1`},
		{"tool.result with an empty id", decodeAction, `{"type":"tool.result","id":"","result":1}`, `"id" is empty: leave it out to answer the call asked`},
		{"tool.result for attempt 0", decodeAction, `{"type":"tool.result","attempt":0,"result":1}`, `"attempt" is 0: attempts count from 1`},
		{"tool.error for attempt -1", decodeAction, `{"type":"tool.error","attempt":-1,"error":"x"}`, `"attempt" is -1: attempts count from 1`},
		{"action that is a number", decodeAction, `5`, `not a JSON object: a number, want an object`},
		{"action whose type is a number", decodeAction, `{"type":5}`, `failed to decode action: "type" is a number, want a string`},
		{"client.event without name", decodeAction, `{"type":"client.event","data":1}`, `missing "name"`},
		{"decision with an action of unknown type", decodeDecision, `{"actions":[{"type":"hold"},{"type":"tool.explode"}]}`, `actions[1]: failed to decode action: unknown type "tool.explode"`},
		{"decision that is not an object", decodeDecision, `"proposed"`, `failed to decode decision`},
		{"decision with actions that are not a list", decodeDecision, `{"actions":{"type":"hold"}}`, `failed to decode decision: "actions" is an object, want an array`},
		{"decision with an action that is not an object", decodeDecision, `{"actions":[1]}`, `actions[0]: failed to decode action: not a JSON object: a number, want an object`},
		{"trigger of unknown type", decodeTrigger, `{"type":"tool.started"}`, `unknown type "tool.started"`},
		{"trigger with a field of the wrong type", decodeTrigger, `{"type":"tool.execute","attempt":"one"}`, `failed to decode tool.execute trigger`},
		{"request with an unknown trigger", decodeRequest, `{"session":"s1","trigger":{"type":"nope"},"proposed":{}}`, `unknown type "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode([]byte(tt.input))
			if err == nil {
				t.Fatalf("decoding %s: no error", tt.input)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decoding %s: error %q does not say %q", tt.input, err, tt.want)
			}
		})
	}
}

func decodeAction(b []byte) error {
	a, err := engine.DecodeAction(b)
	if err == nil && a == nil {
		return errors.New("nil action without an error")
	}
	if err != nil && a != nil {
		return errors.New("an action and an error")
	}
	return err
}

func decodeDecision(b []byte) error {
	var d engine.Decision
	return json.Unmarshal(b, &d)
}

func decodeTrigger(b []byte) error {
	tr, err := engine.DecodeTrigger(b)
	if err != nil && tr != nil {
		return errors.New("a trigger and an error")
	}
	return err
}

func decodeRequest(b []byte) error {
	var r engine.DecideRequest
	return json.Unmarshal(b, &r)
}

// TestDecodeEmptyToolError: a worker's tool.error whose error is empty (a
// JavaScript worker's new Error().message) is the tool's failure, not an
// answer the gateway cannot read: read as one, it ran the tool again.
func TestDecodeEmptyToolError(t *testing.T) {
	a, err := engine.DecodeAction([]byte(`{"type":"tool.error","id":"call_1","error":""}`))
	if err != nil {
		t.Fatalf("a tool.error with an empty error: %v", err)
	}
	if e, ok := a.(engine.ToolError); !ok || e.ID != "call_1" || e.Error != "" {
		t.Errorf("decoded %#v", a)
	}
}
