package anthropic

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
		req  model.Request
		// want holds the body fields to check, as JSON.
		want map[string]string
	}{
		{
			name: "system, max tokens and tools",
			req: model.Request{
				Model:     "claude-test",
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
				"model":      `"claude-test"`,
				"max_tokens": `100`,
				"stream":     `true`,
				"system":     `[{"type":"text","text":"You are terse."}]`,
				"tools": `[
					{"name":"get_weather","description":"Weather for a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
					{"name":"get_local_time","input_schema":{"type":"object"}},
					{"name":"untyped","input_schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1.5}}}},
					{"name":"nullable","input_schema":{"type":"object"}}
				]`,
				"messages": `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`,
			},
		},
		{
			name: "default max tokens, no system, no tools",
			req:  model.Request{Model: "claude-test", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}},
			want: map[string]string{"max_tokens": `4096`, "system": ``, "tools": ``},
		},
		{
			name: "tool uses and results",
			req: model.Request{Model: "claude-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "weather in Tokyo and Paris?"},
				{Role: model.RoleAssistant, Content: "Checking.", ToolUses: []model.ToolUse{
					{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`},
					{ID: "toolu_2", Name: "get_weather", Arguments: `{"city": Paris}`},
				}},
				{Role: model.RoleTool, ToolUseID: "toolu_1", Name: "get_weather", Content: `{"sky":"sunny"}`},
				{Role: model.RoleTool, ToolUseID: "toolu_2", Name: "get_weather", Content: "arguments are not JSON", IsError: true},
				{Role: model.RoleAssistant, Content: "Tokyo is sunny."},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"text","text":"weather in Tokyo and Paris?"}]},
				{"role":"assistant","content":[
					{"type":"text","text":"Checking."},
					{"type":"text","text":"[The arguments of tool call toolu_2 (get_weather) were not a JSON object, so {} was sent in their place. They were: {\"city\": Paris}]"},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Tokyo"}},
					{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{}}
				]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"sky\":\"sunny\"}"}]},
					{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"arguments are not JSON"}],"is_error":true}
				]},
				{"role":"assistant","content":[{"type":"text","text":"Tokyo is sunny."}]}
			]`},
		},
		{
			name: "a tool use under a name no tool can have goes as invalid_tool_name, with a note",
			req: model.Request{Model: "claude-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "weather?"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{
					{ID: "toolu_1", Name: "functions.get_weather", Arguments: `{"city":"Tokyo"}`},
					{ID: "toolu_2", Arguments: `[]`},
				}},
				{Role: model.RoleTool, ToolUseID: "toolu_1", Name: "functions.get_weather", Content: "There is no tool named", IsError: true},
				{Role: model.RoleTool, ToolUseID: "toolu_2", Content: "The call names no tool.", IsError: true},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"text","text":"weather?"}]},
				{"role":"assistant","content":[
					{"type":"text","text":"[Tool call toolu_1 named the tool \"functions.get_weather\", which is not a name a tool can have, so it is sent as invalid_tool_name.]"},
					{"type":"text","text":"[Tool call toolu_2 named no tool, so it is sent as invalid_tool_name.]"},
					{"type":"text","text":"[The arguments of tool call toolu_2 (invalid_tool_name) were not a JSON object, so {} was sent in their place. They were: []]"},
					{"type":"tool_use","id":"toolu_1","name":"invalid_tool_name","input":{"city":"Tokyo"}},
					{"type":"tool_use","id":"toolu_2","name":"invalid_tool_name","input":{}}
				]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"There is no tool named"}],"is_error":true},
					{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"The call names no tool."}],"is_error":true}
				]}
			]`},
		},
		{
			name: "a result that matches no tool use is user text after the results",
			req: model.Request{Model: "claude-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "go"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "toolu_1", Name: "confirm", Arguments: `{"question":"ok?"}`}}},
				{Role: model.RoleTool, ToolUseID: "toolu_9", Name: "confirm", Content: "stray"},
				{Role: model.RoleTool, ToolUseID: "toolu_1", Name: "confirm", Content: "approved"},
				{Role: model.RoleTool, ToolUseID: "toolu_1", Name: "confirm", Content: "twice", IsError: true},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"text","text":"go"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"confirm","input":{"question":"ok?"}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"approved"}]},
					{"type":"text","text":"[Result of tool \"confirm\" for call \"toolu_9\", which matches no open tool call:]\nstray"},
					{"type":"text","text":"[Error of tool \"confirm\" for call \"toolu_1\", which matches no open tool call:]\ntwice"}
				]}
			]`},
		},
		{
			name: "a tool use left unanswered gets an error result; empty content and no-argument calls",
			req: model.Request{Model: "claude-test", Messages: []model.Message{
				{Role: model.RoleUser, Content: "time?"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "toolu_3", Name: "get_local_time"}}},
				{Role: model.RoleUser, Content: "never mind"},
				{Role: model.RoleAssistant, Content: "  "},
				{Role: model.RoleUser, Content: "again"},
				{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "toolu_4", Name: "get_local_time", Arguments: " {} "}}},
				{Role: model.RoleTool, ToolUseID: "toolu_4", Name: "get_local_time"},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"text","text":"time?"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"get_local_time","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_3","content":[{"type":"text","text":"No result was recorded for this tool call."}],"is_error":true},
					{"type":"text","text":"never mind"},
					{"type":"text","text":"again"}
				]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_4","name":"get_local_time","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_4"}]}
			]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply{Events: textTurn("ok")})
			m, _ := newModel(t, srv, Options{})
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

func FuzzObjectInput(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, `{"a":`, "[]", "null", " {\"x\": [1,2]} ", "\"str\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		input, ok := objectInput(args)
		var obj map[string]any
		if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
			t.Fatalf("objectInput(%q) = %s, not a JSON object", args, input)
		}
		if !ok && string(input) != "{}" {
			t.Fatalf("objectInput(%q) = %s, %v; a rejected input must become {}", args, input, ok)
		}
	})
}
