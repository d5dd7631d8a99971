package scripted

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine/model"
)

// fastDemo is the demo script without its delays, so tests stay quick; the
// delays are tested on their own.
func fastDemo(t *testing.T) *Model {
	t.Helper()
	s := Demo()
	s.Delay = ""
	for i := range s.Rules {
		s.Rules[i].Delay = ""
	}
	m, err := New(s)
	if err != nil {
		t.Fatalf("New(Demo()): %v", err)
	}
	return m
}

// generate runs one streamed turn and checks what every turn must satisfy:
// the deltas concatenate to Text.
func generate(t *testing.T, m model.Model, msgs ...model.Message) (model.Response, []string) {
	t.Helper()
	var deltas []string
	resp, err := m.Generate(context.Background(), model.Request{Messages: msgs, Stream: true}, func(s string) {
		deltas = append(deltas, s)
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := strings.Join(deltas, ""); got != resp.Text {
		t.Fatalf("deltas concatenate to %q, Text is %q", got, resp.Text)
	}
	return resp, deltas
}

func user(s string) model.Message { return model.Message{Role: model.RoleUser, Content: s} }

func TestDemoPhrases(t *testing.T) {
	m := fastDemo(t)
	tests := []struct {
		say      string
		text     string // substring of the reply; "" to skip
		tools    []model.ToolUse
		stopWant string
	}{
		{"what's the weather in Tokyo", "weather in Tokyo", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`}}, model.StopToolUse},
		{"What's the weather like in São Paulo?", "São Paulo", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"São Paulo"}`}}, model.StopToolUse},
		{"What's the weather like in New York today?", "weather in New York.", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"New York"}`}}, model.StopToolUse},
		{"WEATHER IN tokyo right now", "", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"tokyo"}`}}, model.StopToolUse},
		{"weather in Paris and Rome tomorrow", "", []model.ToolUse{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
		}, model.StopToolUse},
		{"weather in Atlantis", "", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Atlantis"}`}}, model.StopToolUse},
		{"weather in Tokyo and Paris", "Tokyo and Paris", []model.ToolUse{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`},
			{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		}, model.StopToolUse},
		{"how's the weather?", "Which city?", nil, model.StopEndTurn},
		{"what time is it", "", []model.ToolUse{{ID: "call_1", Name: "get_local_time", Arguments: `{}`}}, model.StopToolUse},
		{"Hey, what time is it?", "", []model.ToolUse{{ID: "call_1", Name: "get_local_time", Arguments: `{}`}}, model.StopToolUse},
		{"switch to dark theme", "dark", []model.ToolUse{{ID: "call_1", Name: "set_theme", Arguments: `{"theme":"dark"}`}}, model.StopToolUse},
		{"Dark mode please", "dark", []model.ToolUse{{ID: "call_1", Name: "set_theme", Arguments: `{"theme":"dark"}`}}, model.StopToolUse},
		{"light theme", "light", []model.ToolUse{{ID: "call_1", Name: "set_theme", Arguments: `{"theme":"light"}`}}, model.StopToolUse},
		{"delete my draft", "ask you", []model.ToolUse{{ID: "call_1", Name: "confirm", Arguments: `{"question":"Delete your draft?"}`}}, model.StopToolUse},
		{"test slow tool", "never_answers", []model.ToolUse{{ID: "call_1", Name: "never_answers", Arguments: `{}`}}, model.StopToolUse},
		{"test malformed", "malformed", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city": `}}, model.StopToolUse},
		{"test invalid", "", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"town":"Paris"}`}}, model.StopToolUse},
		{"test bad output", "bad_output", []model.ToolUse{{ID: "call_1", Name: "bad_output", Arguments: `{}`}}, model.StopToolUse},
		{"stream a long answer", "time to cancel it", nil, model.StopEndTurn},
		{"hello", "Hello!", nil, model.StopEndTurn},
		{"tell me a joke", "what's the weather in Tokyo", nil, model.StopEndTurn},
		{"can you test slow tool", "only know a few phrases", nil, model.StopEndTurn},
		// A test phrase is the whole message: one that starts a sentence
		// is ordinary chat.
		{"  Test Malformed ", "malformed", []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city": `}}, model.StopToolUse},
		{"test loop is what I want to avoid", "only know a few phrases", nil, model.StopEndTurn},
		{"stream a long answer about cats", "only know a few phrases", nil, model.StopEndTurn},
	}
	for _, tt := range tests {
		t.Run(tt.say, func(t *testing.T) {
			t.Parallel()
			resp, _ := generate(t, m, user(tt.say))
			if !strings.Contains(resp.Text, tt.text) {
				t.Errorf("Text = %q, want it to contain %q", resp.Text, tt.text)
			}
			if !reflect.DeepEqual(resp.ToolUses, tt.tools) {
				t.Errorf("ToolUses = %+v, want %+v", resp.ToolUses, tt.tools)
			}
			if resp.StopReason != tt.stopWant {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, tt.stopWant)
			}
		})
	}
}

// toolTurn is a transcript that ends with the results of the calls the
// model made for prompt: the shape the engine re-prompts with.
func toolTurn(t *testing.T, m model.Model, prompt string, results ...model.Message) []model.Message {
	t.Helper()
	resp, _ := generate(t, m, user(prompt))
	if len(resp.ToolUses) != len(results) {
		t.Fatalf("%q made %d tool uses, the test gives %d results", prompt, len(resp.ToolUses), len(results))
	}
	msgs := []model.Message{user(prompt), {Role: model.RoleAssistant, Content: resp.Text, ToolUses: resp.ToolUses}}
	for i, r := range results {
		r.Role = model.RoleTool
		r.ToolUseID = resp.ToolUses[i].ID
		r.Name = resp.ToolUses[i].Name
		msgs = append(msgs, r)
	}
	return msgs
}

func ok(content string) model.Message  { return model.Message{Content: content} }
func bad(content string) model.Message { return model.Message{Content: content, IsError: true} }

func TestDemoAfterTool(t *testing.T) {
	m := fastDemo(t)
	tests := []struct {
		name    string
		prompt  string
		results []model.Message
		want    string
	}{
		{"weather ok", "weather in Tokyo", []model.Message{ok(`It's clear in Tokyo.`)}, "get_weather returned: It's clear in Tokyo."},
		{"weather ok as JSON string", "weather in Tokyo", []model.Message{ok(`"It's clear in Tokyo."`)}, "get_weather returned: It's clear in Tokyo."},
		{"weather error", "weather in Atlantis", []model.Message{bad("No forecast for Atlantis.")}, "get_weather failed: No forecast for Atlantis."},
		{"two cities", "weather in Tokyo and Paris", []model.Message{ok("It's clear in Tokyo."), bad("No forecast for Paris.")},
			"get_weather returned: It's clear in Tokyo. get_weather failed: No forecast for Paris."},
		{"approved", "delete my draft", []model.Message{ok(`{"approved": true}`)}, "Okay, I deleted your draft."},
		{"denied", "delete my draft", []model.Message{ok("{\n  \"approved\": false\n}")}, "Okay, I kept your draft."},
		{"confirm odd result", "delete my draft", []model.Message{ok(`"maybe"`)}, "I couldn't tell whether you approved (confirm returned: maybe), so I kept your draft."},
		{"confirm timeout", "delete my draft", []model.Message{bad("The page did not answer in 30s.")}, "I couldn't ask you (The page did not answer in 30s.), so I kept your draft."},
		{"time", "what time is it", []model.Message{ok(`{"time": "2026-05-01T14:05:00+02:00", "timeZone": "Europe/Paris"}`)}, "Your page says it's 2026-05-01T14:05:00+02:00 in Europe/Paris."},
		{"time as text", "what time is it", []model.Message{ok(`14:05 (Europe/Paris)`)}, "Your page says the local time is 14:05 (Europe/Paris)."},
		{"dark", "dark theme", []model.Message{ok(`{"theme":"dark"}`)}, "Done: the page uses the dark theme now."},
		{"light", "light theme", []model.Message{ok(`"light"`)}, "Done: the page uses the light theme now."},
		{"theme error", "dark theme", []model.Message{bad("No such theme.")}, "set_theme failed: No such theme."},
		{"slow tool", "test slow tool", []model.Message{bad("timed out after 30s")}, "never_answers failed: timed out after 30s"},
		{"empty result", "test bad output", []model.Message{ok("")}, "bad_output returned nothing."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, _ := generate(t, m, toolTurn(t, m, tt.prompt, tt.results...)...)
			if resp.Text != tt.want {
				t.Errorf("Text = %q, want %q", resp.Text, tt.want)
			}
			if resp.StopReason != model.StopEndTurn || resp.ToolUses != nil {
				t.Errorf("StopReason = %q, ToolUses = %v; want end_turn and none", resp.StopReason, resp.ToolUses)
			}
		})
	}
}

// Parallel calls settle in any order; the reply follows the order the model
// asked for them, so a test can assert one text.
func TestAfterToolOrderFollowsToolUses(t *testing.T) {
	m := fastDemo(t)
	msgs := toolTurn(t, m, "weather in Tokyo and Paris", ok("Tokyo: clear."), ok("Paris: rain."))
	msgs[2], msgs[3] = msgs[3], msgs[2]
	resp, _ := generate(t, m, msgs...)
	if want := "get_weather returned: Tokyo: clear. get_weather returned: Paris: rain."; resp.Text != want {
		t.Errorf("Text = %q, want %q", resp.Text, want)
	}
}

func TestAfterToolTemplates(t *testing.T) {
	m, err := New(Script{
		Rules: []Rule{{Match: "go", Tools: []ToolCall{{Name: "get_weather"}, {Name: "lookup"}, {Name: "other"}}}},
		AfterTool: []AfterTool{
			{Tool: "get_weather", OK: "The forecast: ${result}", Error: "Sorry: ${error}"},
			{Match: `^(?P<n>\d+) hits$`, OK: "${tool} found ${n}."},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		results []model.Message
		want    string
	}{
		{"ok", []model.Message{ok("Sunny."), ok("3 hits"), ok("x")}, "The forecast: Sunny. lookup found 3. other returned: x"},
		{"error", []model.Message{bad("No forecast."), ok("none"), bad("boom")}, "Sorry: No forecast. lookup returned: none other failed: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := generate(t, m, toolTurn(t, m, "go", tt.results...)...)
			if resp.Text != tt.want {
				t.Errorf("Text = %q, want %q", resp.Text, tt.want)
			}
		})
	}
}

func TestChunkedStreaming(t *testing.T) {
	m := fastDemo(t)
	resp, deltas := generate(t, m, user("stream a long answer"))
	if len(deltas) != 32 {
		t.Fatalf("got %d deltas, want the 32 docs/scripts.md promises", len(deltas))
	}
	for i, d := range deltas[:len(deltas)-1] {
		if n := len(strings.Fields(d)); n != 3 {
			t.Errorf("delta %d %q has %d words, want 3", i, d, n)
		}
	}
	if resp.Usage.OutputTokens != len(strings.Fields(resp.Text)) {
		t.Errorf("OutputTokens = %d, want the word count %d", resp.Usage.OutputTokens, len(strings.Fields(resp.Text)))
	}
	if resp.Usage.InputTokens != 4 {
		t.Errorf("InputTokens = %d, want 4 (the words of the prompt)", resp.Usage.InputTokens)
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"one", 3, []string{"one"}},
		{"a b c d e", 2, []string{"a b ", "c d ", "e"}},
		{"  lead  and trail  ", 1, []string{"  lead  ", "and ", "trail  "}},
		{"line one\nline two", 2, []string{"line one\n", "line two"}},
	}
	for _, tt := range tests {
		if got := chunks(tt.text, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", tt.text, tt.n, got, tt.want)
		}
	}
}

func TestChunkWordsAndNoStream(t *testing.T) {
	m, err := New(Script{ChunkWords: 1, Rules: []Rule{
		{Match: "one", Say: "a b c d"},
		{Match: "big", Say: "a b c d", ChunkWords: 100},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prompt string
		stream bool
		want   int
	}{
		{"one", true, 4},
		{"big", true, 1},
		{"one", false, 1},
	}
	for _, tt := range tests {
		var n int
		resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user(tt.prompt)}, Stream: tt.stream},
			func(string) { n++ })
		if err != nil || resp.Text != "a b c d" {
			t.Fatalf("Generate(%q) = %q, %v", tt.prompt, resp.Text, err)
		}
		if n != tt.want {
			t.Errorf("Generate(%q, stream=%v) made %d deltas, want %d", tt.prompt, tt.stream, n, tt.want)
		}
	}
}

func TestCancel(t *testing.T) {
	m, err := New(Script{ChunkWords: 1, Delay: "1ms", Rules: []Rule{
		{Match: "go", Say: "one two three four five", Tools: []ToolCall{{Name: "t"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas []string
	resp, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("go")}, Stream: true}, func(s string) {
		deltas = append(deltas, s)
		if len(deltas) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	want := model.Response{Text: "one two ", StopReason: model.StopCancelled, Usage: model.Usage{InputTokens: 1, OutputTokens: 2}}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("resp = %+v, want %+v", resp, want)
	}
}

func TestCancelDuringDelay(t *testing.T) {
	m, err := New(Script{Delay: "1h", Rules: []Rule{{Match: "go", Say: "never arrives"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	resp, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("go")}, Stream: true}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || resp.StopReason != model.StopCancelled || resp.Text != "" {
		t.Errorf("Generate = %+v, %v; want no text, cancelled, DeadlineExceeded", resp, err)
	}
}

// The last delta may be the one that sees the cancel; the tool uses, which
// follow the text, must then not be returned.
func TestCancelBeforeToolUses(t *testing.T) {
	m, err := New(Script{Rules: []Rule{{Match: "go", Say: "hi", Tools: []ToolCall{{Name: "t"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("go")}, Stream: true}, func(string) { cancel() })
	if !errors.Is(err, context.Canceled) || resp.ToolUses != nil || resp.Text != "hi" || resp.StopReason != model.StopCancelled {
		t.Errorf("Generate = %+v, %v; want text hi, no tool uses, cancelled", resp, err)
	}
}

func TestDelay(t *testing.T) {
	m, err := New(Script{ChunkWords: 1, Delay: "5ms", Rules: []Rule{{Match: "go", Say: "a b c d"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{true, false} {
		start := time.Now()
		if _, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("go")}, Stream: stream}, nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Errorf("stream=%v took %v, want at least 4 delays of 5ms", stream, d)
		}
	}
}

func TestMalformedArgumentsStreamAsWritten(t *testing.T) {
	args := []string{`{"city": `, `not json`, `[1,2]`, `{"city":"${city}"`, `  {"spaced" :  1}  `}
	for _, a := range args {
		m, err := New(Script{Rules: []Rule{{Match: "(?P<city>.+)", Tools: []ToolCall{{Name: "t", Arguments: Arguments(a)}}}}})
		if err != nil {
			t.Fatalf("New with arguments %q: %v", a, err)
		}
		resp, _ := generate(t, m, user("Rome"))
		want := strings.ReplaceAll(a, "${city}", "Rome")
		if got := resp.ToolUses[0].Arguments; got != want {
			t.Errorf("arguments %q streamed as %q, want %q", a, got, want)
		}
	}
}

func TestArgumentsAreJSONEscaped(t *testing.T) {
	m, err := New(Script{Rules: []Rule{{
		Match: `say (?P<x>.+)`,
		Say:   "You said ${x}.",
		Tools: []ToolCall{{Name: "echo", Arguments: `{"x":"${x}"}`}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := generate(t, m, user(`say "quoted" <b>\ & tab	end`))
	if want := `You said "quoted" <b>\ & tab	end.`; resp.Text != want {
		t.Errorf("Text = %q, want %q (say is not escaped)", resp.Text, want)
	}
	if want := `{"x":"\"quoted\" <b>\\ & tab\tend"}`; resp.ToolUses[0].Arguments != want {
		t.Errorf("Arguments = %s, want %s", resp.ToolUses[0].Arguments, want)
	}
}

func TestToolUseIDs(t *testing.T) {
	m := fastDemo(t)
	msgs := toolTurn(t, m, "weather in Tokyo and Paris", ok("a"), ok("b"))
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: "done"}, user("delete my draft"))
	resp, _ := generate(t, m, msgs...)
	if len(resp.ToolUses) != 1 || resp.ToolUses[0].ID != "call_3" {
		t.Errorf("ToolUses = %+v, want one with id call_3", resp.ToolUses)
	}

	// Ids another provider minted are skipped, not reused.
	foreign := []model.Message{
		user("x"),
		{Role: model.RoleAssistant, ToolUses: []model.ToolUse{{ID: "call_2", Name: "t"}}},
		{Role: model.RoleTool, ToolUseID: "call_2", Content: "r"},
		{Role: model.RoleAssistant, Content: "ok"},
		user("weather in Tokyo and Paris"),
	}
	resp, _ = generate(t, m, foreign...)
	if got := []string{resp.ToolUses[0].ID, resp.ToolUses[1].ID}; !reflect.DeepEqual(got, []string{"call_3", "call_4"}) {
		t.Errorf("ids = %v, want [call_3 call_4]", got)
	}
}

func TestMaxTokens(t *testing.T) {
	m, err := New(Script{Rules: []Rule{{Match: "go", Say: "one two three four", Tools: []ToolCall{{Name: "t"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("go")}, MaxTokens: 2, Stream: true}, nil)
	if err != nil || resp.Text != "one two" || resp.ToolUses != nil || resp.StopReason != model.StopMaxTokens {
		t.Errorf("Generate = %+v, %v; want \"one two\", no tool uses, max_tokens", resp, err)
	}
}

func TestTranscriptEdges(t *testing.T) {
	m, err := New(Script{Fallback: "No rule for ${message}.", Rules: []Rule{{Match: "hi", Say: "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msgs []model.Message
		want string
	}{
		{"empty transcript", nil, "No rule for ."},
		{"ends with assistant", []model.Message{user("hi"), {Role: model.RoleAssistant, Content: "hello"}}, "No rule for ."},
		{"fallback echoes", []model.Message{user("  bye \n")}, "No rule for bye."},
		{"orphan tool message", []model.Message{{Role: model.RoleTool, Content: "r"}}, "the tool returned: r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := generate(t, m, tt.msgs...)
			if resp.Text != tt.want {
				t.Errorf("Text = %q, want %q", resp.Text, tt.want)
			}
		})
	}
}

// One Model serves many sessions at once; -race checks it shares nothing.
func TestConcurrentSessions(t *testing.T) {
	m := fastDemo(t)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			city := fmt.Sprintf("City%c", 'A'+i%26)
			resp, err := m.Generate(context.Background(), model.Request{
				Messages: []model.Message{user("weather in " + city)}, Stream: true,
			}, func(string) {})
			if err != nil || len(resp.ToolUses) != 1 || resp.ToolUses[0].Arguments != `{"city":"`+city+`"}` {
				t.Errorf("session %d: %+v, %v", i, resp, err)
			}
		})
	}
	wg.Wait()
}

// The demo as shipped, delays included, still answers the same.
func TestDemoWithDelays(t *testing.T) {
	m, err := New(Demo())
	if err != nil {
		t.Fatal(err)
	}
	resp, deltas := generate(t, m, user("delete my draft"))
	if len(resp.ToolUses) != 1 || resp.ToolUses[0].Name != "confirm" || len(deltas) < 2 {
		t.Errorf("resp = %+v with %d deltas", resp, len(deltas))
	}
}
