package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
)

func TestRequestBody(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		req  model.Request
		// want holds the body fields to check, as JSON; "" means absent.
		want map[string]string
	}{
		{
			name: "system, max tokens, tools, stream options",
			req: model.Request{
				Model:     "llama3.1",
				System:    "You are terse.",
				MaxTokens: 100,
				Messages:  []model.Message{{Role: model.RoleUser, Content: "hi"}},
				Tools: []model.Tool{
					{Name: "get_weather", Description: "Weather for a city.", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
					{Name: "get_local_time"},
					{Name: "untyped", InputSchema: json.RawMessage(`{"properties":{"n":{"type":"integer","minimum":1.5}}}`)},
					{Name: "nullable", InputSchema: json.RawMessage(`{"type":["object","null"]}`)},
				},
			},
			want: map[string]string{
				"model":                 `"llama3.1"`,
				"stream":                `true`,
				"stream_options":        `{"include_usage":true}`,
				"max_tokens":            `100`,
				"max_completion_tokens": ``,
				"messages":              `[{"role":"system","content":"You are terse."},{"role":"user","content":"hi"}]`,
				"tools": `[
					{"type":"function","function":{"name":"get_weather","description":"Weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
					{"type":"function","function":{"name":"get_local_time","parameters":{"type":"object","properties":{}}}},
					{"type":"function","function":{"name":"untyped","parameters":{"type":"object","properties":{"n":{"type":"integer","minimum":1.5}}}}},
					{"type":"function","function":{"name":"nullable","parameters":{"type":"object"}}}
				]`,
			},
		},
		{
			name: "max_completion_tokens when asked",
			opts: Options{MaxTokensField: "max_completion_tokens"},
			req:  model.Request{Model: "gpt-5", MaxTokens: 50, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}},
			want: map[string]string{"max_completion_tokens": `50`, "max_tokens": ``, "tools": ``},
		},
		{
			name: "no bound, no system",
			req:  model.Request{Model: "gpt-test", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}},
			want: map[string]string{"max_completion_tokens": ``, "max_tokens": ``, "messages": `[{"role":"user","content":"hi"}]`},
		},
		{
			name: "tool calls and results",
			req: model.Request{Model: "gpt-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "weather in Tokyo and Paris?"},
				{Role: model.RoleAssistant, Content: "Checking.", ToolUses: []model.ToolUse{
					{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`},
					{ID: "call_2", Name: "get_weather", Arguments: `{"city": Paris}`},
				}},
				{Role: model.RoleTool, ToolUseID: "call_9", Name: "get_weather", Content: "stray"},
				{Role: model.RoleTool, ToolUseID: "call_1", Name: "get_weather", Content: `{"sky":"sunny"}`},
				{Role: model.RoleTool, ToolUseID: "call_2", Name: "get_weather", Content: "arguments are not JSON", IsError: true},
				{Role: model.RoleAssistant, Content: "Tokyo is sunny."},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":"weather in Tokyo and Paris?"},
				{"role":"assistant","content":"Checking.\n[The arguments of tool call call_2 (get_weather) were not a JSON object, so {} was sent in their place. They were: {\"city\": Paris}]","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}},
					{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{}"}}
				]},
				{"role":"tool","tool_call_id":"call_1","content":"{\"sky\":\"sunny\"}"},
				{"role":"tool","tool_call_id":"call_2","content":"Error: arguments are not JSON"},
				{"role":"user","content":"[Result of tool \"get_weather\" for call \"call_9\", which matches no open tool call:]\nstray"},
				{"role":"assistant","content":"Tokyo is sunny."}
			]`},
		},
		{
			name: "a call under a name no tool can have goes as invalid_tool_name, with a note",
			req: model.Request{Model: "gpt-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "weather?"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "call_1", Name: "functions.get_weather", Arguments: `{"city":"Tokyo"}`}}},
				{Role: model.RoleTool, ToolUseID: "call_1", Name: "functions.get_weather", Content: "There is no tool named", IsError: true},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":"weather?"},
				{"role":"assistant","content":"[Tool call call_1 named the tool \"functions.get_weather\", which is not a name a tool can have, so it is sent as invalid_tool_name.]","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"invalid_tool_name","arguments":"{\"city\":\"Tokyo\"}"}}
				]},
				{"role":"tool","tool_call_id":"call_1","content":"Error: There is no tool named"}
			]`},
		},
		{
			name: "a call left unanswered gets an error result; empty messages are dropped",
			req: model.Request{Model: "gpt-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "time?"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "call_3", Name: "get_local_time"}}},
				{Role: model.RoleUser, Content: "never mind"},
				{Role: model.RoleAssistant, Content: " "},
				{Role: model.RoleUser, Content: ""},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":"time?"},
				{"role":"assistant","tool_calls":[{"id":"call_3","type":"function","function":{"name":"get_local_time","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_3","content":"Error: no result was recorded for this tool call."},
				{"role":"user","content":"never mind"}
			]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply{Events: textTurn("ok")})
			m, _ := newModel(t, srv, tt.opts)
			tt.req.Stream = true
			if _, _, err := fakeapi.Generate(t, m, tt.req); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			body := srv.Body(0)
			for field, want := range tt.want {
				got, present := body[field]
				if want == "" {
					if present {
						t.Errorf("%s = %s, want it absent", field, fakeapi.Pretty(got))
					}
					continue
				}
				if w := fakeapi.Decode(t, want); !reflect.DeepEqual(got, w) {
					t.Errorf("%s =\n%s\nwant\n%s", field, fakeapi.Pretty(got), fakeapi.Pretty(w))
				}
			}
		})
	}
}

func FuzzObjectArguments(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, `{"a":`, "[]", "null", " {\"x\": [1,2]} "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		got, ok := objectArguments(args)
		var obj map[string]any
		if err := json.Unmarshal([]byte(got), &obj); err != nil || obj == nil {
			t.Fatalf("objectArguments(%q) = %s, not a JSON object", args, got)
		}
		if ok && got != args && got != "{}" {
			t.Fatalf("objectArguments(%q) = %q; an accepted object must go verbatim", args, got)
		}
	})
}

func TestMaxTokensField(t *testing.T) {
	tests := []struct {
		opts Options
		want string // the field that carries the bound
	}{
		{Options{}, "max_completion_tokens"}, // OpenAI itself
		{Options{BaseURL: "https://api.openai.com/v1"}, "max_completion_tokens"},
		{Options{BaseURL: "http://localhost:8080/v1"}, "max_tokens"},
		{Options{BaseURL: "http://localhost:8080/v1", MaxTokensField: "max_completion_tokens"}, "max_completion_tokens"},
		{Options{MaxTokensField: "max_tokens"}, "max_tokens"},
	}
	for _, tt := range tests {
		m, err := New(tt.opts)
		if err != nil {
			t.Fatalf("New(%+v): %v", tt.opts, err)
		}
		// Only the mapping runs: nothing is sent.
		b, err := json.Marshal(m.params(model.Request{Model: "m", MaxTokens: 64}))
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.Unmarshal(b, &body)
		other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[tt.want]
		if body[tt.want] != 64.0 || body[other] != nil {
			t.Errorf("%+v: body %s, want %s: 64 alone", tt.opts, b, tt.want)
		}
	}
	if _, err := New(Options{MaxTokensField: "max_output_tokens"}); err == nil {
		t.Error("New accepted an unknown MaxTokensField")
	}
}
