package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// checkAppender holds v's own writer to encoding/json's bytes (without
// HTML's escapes: marshalNoHTML); a writer that declines must leave
// withJSON with those bytes too.
func checkAppender(t *testing.T, v jsonAppender) {
	t.Helper()
	want, err := marshalNoHTML(v)
	if err != nil {
		t.Fatalf("%T: Marshal: %v", v, err)
	}
	if got, ok := v.appendJSON(nil); ok && !bytes.Equal(got, want) {
		t.Errorf("%T:\n own     %s\n Marshal %s", v, got, want)
	}
	var got []byte
	if err := withJSON(v, func(body []byte) { got = bytes.Clone(body) }); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%T through withJSON: %s, %v; want %s", v, got, err, want)
	}
}

var tricky = []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "line\nbreak\ttab\x01", "é日本 \u2028\u2029", "bad \xff utf-8", `{"a":1}`}

func TestEventPayloadsAreMarshal(t *testing.T) {
	for _, s := range tricky {
		checkAppender(t, MessageEvent{Message: Message{Role: "user", Content: s}})
		checkAppender(t, MessageEvent{Message: Message{Role: "user", Content: s, ID: s}})
		checkAppender(t, MessageEvent{Message: Message{Role: "assistant", Content: s, ToolUses: []ToolUse{{ID: "toolu_1", Name: "echo", Arguments: s}, {ID: s, Name: s}}}})
		checkAppender(t, MessageEvent{Message: Message{Role: "tool", Content: s, ToolUseID: "toolu_1", Name: s, IsError: true}})
		checkAppender(t, ModelDeltaEvent{Text: s})
		checkAppender(t, ModelFinishedEvent{StopReason: s, Usage: Usage{InputTokens: 12, OutputTokens: -3}, Error: s})
		checkAppender(t, ToolFinishedEvent{ID: "call_1", OK: s == "", Name: "echo", Result: s, Error: s, Code: ErrorCode(s)})
	}
	checkAppender(t, MessageEvent{})
	checkAppender(t, ModelFinishedEvent{})
	checkAppender(t, ToolFinishedEvent{})
	// Marshal compacts a detail: the writer declines, encoding/json writes it.
	checkAppender(t, ToolFinishedEvent{ID: "c", Code: CodeToolFailed, Error: "x", Detail: json.RawMessage(`{ "status" : 503 }`)})
	if _, ok := (ToolFinishedEvent{Detail: json.RawMessage(`{}`)}).appendJSON(nil); ok {
		t.Error("a tool.finished with a detail was written without encoding/json")
	}
}

// TestEventPayloadFields: a field added to a payload that writes itself
// must be written by it too; this fails until its writer (eventenc.go) is
// taught, and then the counts here are updated.
func TestEventPayloadFields(t *testing.T) {
	for _, tc := range []struct {
		v      any
		fields int
	}{
		{MessageEvent{}, 1}, {Message{}, 7}, {ToolUse{}, 3}, {ModelDeltaEvent{}, 1},
		{ModelFinishedEvent{}, 3}, {Usage{}, 2}, {ToolFinishedEvent{}, 7},
	} {
		if n := reflect.TypeOf(tc.v).NumField(); n != tc.fields {
			t.Errorf("%T has %d fields, its writer (eventenc.go) knows %d", tc.v, n, tc.fields)
		}
	}
}

func FuzzEventPayloads(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, "echo", true, 7)
	}
	f.Fuzz(func(t *testing.T, a, b, c string, flag bool, n int) {
		checkAppender(t, MessageEvent{Message: Message{Role: a, Content: b, ToolUses: []ToolUse{{ID: c, Name: a, Arguments: b}}, ToolUseID: c, Name: a, IsError: flag, ID: b}})
		checkAppender(t, ModelDeltaEvent{Text: a})
		checkAppender(t, ModelFinishedEvent{StopReason: a, Usage: Usage{InputTokens: n, OutputTokens: -n}, Error: b})
		checkAppender(t, ToolFinishedEvent{ID: a, OK: flag, Name: b, Result: c, Error: a, Code: ErrorCode(b)})
	})
}
