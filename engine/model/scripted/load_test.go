package scripted

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine/model"
)

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string // substring of the error
	}{
		{"empty", ``, "the script is empty"},
		{"not an object", `[1]`, "the script must be a JSON object, not array"},
		{"syntax", "{\n  \"rules\": [\n    {\"match\": \"a\",}\n  ]\n}", "line 3, column 19: invalid character '}'"},
		{"truncated", `{"rules": [`, "the script ends early"},
		{"trailing data", `{} {}`, "line 1, column 4: unexpected data after the script object"},
		{"wrong type", "{\"rules\": [{\"match\": 5}]}", "line 1, column 22: rules.match must be a string, not number"},
		{"unknown field", "{\n  \"afterTools\": []}", `line 2, column 3: unknown field "afterTools" (did you mean "afterTool"?)`},
		{"misspelt rule field", `{"rules": [{"match": "a", "sya": "x"}]}`, `line 1, column 27: unknown field "sya" in rules[0] (did you mean "say"?)`},
		// A field of another object, found where it is written, not where
		// another object rightly has it.
		{"a field in the wrong object", "{\"afterTool\": [{\"tool\": \"t\", \"ok\": \"x\"}],\n \"rules\": [{\"match\": \"a\", \"say\": \"x\",\n  \"tool\": \"t\"}]}",
			`line 3, column 3: unknown field "tool" in rules[0] (did you mean "tools"?)`},
		{"ok in a rule", `{"rules":[{"match":"a","say":"x","ok":"z"}]}`, `unknown field "ok" in rules[0] (it takes "comment", "match", "say", "tools", "chunkWords", "delay")`},
		{"a comment in a tool call", `{"rules":[{"match":"a","tools":[{"name":"t","comment":"c"}]}]}`, `line 1, column 45: unknown field "comment" in rules[0].tools[0] (it takes "name", "arguments")`},
		{"unknown field no guess", `{"rules": [{"match": "a", "say": "x", "priority": 1}]}`, `unknown field "priority"`},
		{"no match", `{"rules": [{"say": "hi"}]}`, "rules[0].match: required"},
		{"nothing to do", `{"rules": [{"match": "a"}, {"match": "b"}]}`, `rules[0]: needs "say", "tools" or both`},
		{"bad regexp", `{"rules": [{"match": "a", "say": "x"}, {"match": "(?P<city>", "say": "x"}]}`, "rules[1].match: error parsing regexp: missing closing )"},
		{"perl lookahead", `{"rules": [{"match": "a(?=b)", "say": "x"}]}`, "rules[0].match: error parsing regexp: invalid or unsupported Perl syntax"},
		{"unknown group in say", `{"rules": [{"match": "in (?P<city>\\w+)", "say": "${town}"}]}`, "rules[0].say: ${town} is not a group of rules[0].match (its groups: city, 0, 1)"},
		{"unknown group in arguments", `{"rules": [{"match": "x", "tools": [{"name": "t", "arguments": {"city": "${city}"}}]}]}`, "rules[0].tools[0].arguments: ${city} is not a group of rules[0].match (its groups: 0)"},
		{"unclosed placeholder", `{"rules": [{"match": "x", "say": "costs ${price"}]}`, `rules[0].say: unclosed "${" at byte 6`},
		{"empty placeholder", `{"rules": [{"match": "x", "say": "${}"}]}`, `rules[0].say: empty "${}"`},
		{"tool without name", `{"rules": [{"match": "x", "tools": [{"arguments": "{}"}]}]}`, "rules[0].tools[0].name: required"},
		{"bad delay", `{"delay": "5 sec"}`, `delay: want a Go duration like "40ms"`},
		{"delay as number", `{"delay": 40}`, "delay must be a string, not number"},
		{"negative rule delay", `{"rules": [{"match": "x", "say": "y", "delay": "-1s"}]}`, "rules[0].delay: must not be negative"},
		{"negative chunkWords", `{"chunkWords": -1}`, "chunkWords: must not be negative (0: the default), not -1"},
		{"after without template", `{"afterTool": [{"tool": "t"}]}`, `afterTool[0]: needs "ok", "error" or both`},
		{"after bad regexp", `{"afterTool": [{"match": "[", "ok": "x"}]}`, "afterTool[0].match: error parsing regexp"},
		{"after error in ok", `{"afterTool": [{"ok": "${error}"}]}`, "afterTool[0].ok: ${error} is not known here (known: tool, result)"},
		{"after result in error", `{"afterTool": [{"error": "${result}"}]}`, "afterTool[0].error: ${result} is not known here (known: tool, error)"},
		{"after reserved group", `{"afterTool": [{"match": "(?P<result>.)", "ok": "x"}]}`, `afterTool[0].match: group name "result" is reserved`},
		{"fallback unknown", `{"fallback": "${city}"}`, "fallback: ${city} is not known here (known: message)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tt.script))
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "scripted: ") {
				t.Errorf("error = %q\nwant it to start with \"scripted: \" and contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"rules": [{"match": "(?i)ping", "say": "pong"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := generate(t, m, user("PING")); resp.Text != "pong" {
		t.Errorf("Text = %q, want pong", resp.Text)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"rules": [{"match": "("}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), bad+": rules[0]") {
		t.Errorf("LoadFile(bad) error = %v, want it to name the file and rules[0]", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("LoadFile(missing) error = %v, want it to name the file", err)
	}
}

// The embedded demo must load through the public path users take.
func TestDemoJSONLoads(t *testing.T) {
	if _, err := Load(strings.NewReader(string(demoJSON))); err != nil {
		t.Fatal(err)
	}
}

func TestArgumentsJSONForms(t *testing.T) {
	m, err := Load(strings.NewReader(`{"rules": [{"match": "x", "tools": [
		{"name": "a", "arguments": "{\"raw\": "},
		{"name": "b", "arguments": { "pretty" : [1, 2] }},
		{"name": "c", "arguments": null},
		{"name": "d"},
		{"name": "e", "arguments": 42}
	]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := generate(t, m, user("x"))
	want := []string{`{"raw": `, `{"pretty":[1,2]}`, `{}`, `{}`, `42`}
	for i, u := range resp.ToolUses {
		if u.Arguments != want[i] {
			t.Errorf("tool %s arguments = %q, want %q", u.Name, u.Arguments, want[i])
		}
	}
}

func FuzzLoad(f *testing.F) {
	f.Add(string(demoJSON))
	f.Add(`{"rules": [{"match": "(?P<a>.+)", "say": "${a} $$ $", "tools": [{"name": "t", "arguments": "{\"a\":\"${a}\"}"}]}]}`)
	f.Add(`{"afterTool": [{"match": "(?P<n>\\d+)", "ok": "${n}", "error": "${error}"}], "fallback": "${message}"}`)
	f.Add(`{"rules": [{"match": "", "say": "${"}]}`)
	f.Add(`{"chunkWords": 1, "delay": "0s"}`)
	f.Fuzz(func(t *testing.T, script string) {
		m, err := Load(strings.NewReader(script))
		if err != nil {
			return
		}
		// Whatever loads must also answer without panicking; the delays the
		// fuzzer writes would only slow it down.
		m.delay = 0
		for i := range m.rules {
			m.rules[i].delay = 0
		}
		for _, msgs := range [][]model.Message{
			nil,
			{user(script)},
			{user("x"), {Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "call_1", Name: "t"}}}, {Role: model.RoleTool, ToolUseID: "call_1", Content: script, IsError: len(script)%2 == 0}},
		} {
			resp, err := m.Generate(context.Background(), model.Request{Messages: msgs, Stream: true}, func(string) {})
			if err != nil || resp.StopReason == "" {
				t.Fatalf("Generate = %+v, %v", resp, err)
			}
		}
	})
}
