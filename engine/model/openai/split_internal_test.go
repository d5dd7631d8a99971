package openai

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
)

// TestSplitCharacters: a character a server cut between two chunks (an
// emoji as two surrogate escapes, a UTF-8 sequence between its bytes) is
// whole in the deltas and in the turn's text, not U+FFFD; an escaped
// backslash before "ud83d" is text; a half that never gets its other half
// is U+FFFD once, at the end.
func TestSplitCharacters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string // each chunk's content, as JSON string text
		deltas []string
		text   string
	}{
		{"surrogate escapes", []string{`"A"`, `"\ud83d"`, `"\ude00"`, `"B"`}, []string{"A", "😀", "B"}, "A😀B"},
		{"a surrogate pair's halves with text", []string{`"x\uD83D"`, `"\uDE00y"`}, []string{"x", "😀y"}, "x😀y"},
		{"a UTF-8 sequence cut", []string{"\"C\xc3\"", "\"\xa9D\""}, []string{"C", "éD"}, "CéD"},
		{"a four-byte sequence cut twice", []string{"\"\xf0\x9f\"", "\"\x98\"", "\"\x80!\""}, []string{"😀!"}, "😀!"},
		{"an escaped backslash", []string{`"a\\ud83d"`, `"b"`}, []string{`a\ud83d`, "b"}, `a\ud83db`},
		{"a half that stays half", []string{`"A"`, `"\ud83d"`}, []string{"A"}, "A\uFFFD"},
		{"whole characters", []string{`"é"`, `"😀"`}, []string{"é", "😀"}, "é😀"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a accumulator
			var deltas []string
			for _, p := range tc.pieces {
				var chunk sdk.ChatCompletionChunk
				raw := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + p + `}}]}`
				if err := json.Unmarshal([]byte(raw), &chunk); err != nil {
					t.Fatalf("chunk %s: %v", raw, err)
				}
				a.add(chunk, func(s string) { deltas = append(deltas, s) })
			}
			if got := strings.Join(deltas, "|"); got != strings.Join(tc.deltas, "|") {
				t.Errorf("deltas %q, want %q", deltas, tc.deltas)
			}
			if got := a.response().Text; got != tc.text {
				t.Errorf("text %q, want %q", got, tc.text)
			}
		})
	}
}
