package engine

import (
	"strings"
	"testing"
)

// TestTitleOf: a chat's title is its first message's words on one line, cut
// after 79 characters as a reader counts them (never inside a flag, an
// emoji's sequence, a letter and its accent), with nothing that hides or
// reorders text (control characters, right-to-left overrides).
func TestTitleOf(t *testing.T) {
	family := "👨\u200d👩\u200d👧\u200d👦"
	for _, tc := range []struct {
		name, content, want string
	}{
		{"short", "hello   there\n\tfriend", "hello there friend"},
		{"exactly 80", strings.Repeat("a", 80), strings.Repeat("a", 80)},
		{"long", strings.Repeat("a", 100), strings.Repeat("a", 79) + "…"},
		{"a family's emoji at the cut", strings.Repeat("a", 78) + family + "bc", strings.Repeat("a", 78) + family + "…"},
		{"a flag at the cut", strings.Repeat("a", 78) + "🇯🇵" + "bc", strings.Repeat("a", 78) + "🇯🇵" + "…"},
		{"a skin tone at the cut", strings.Repeat("a", 78) + "👋🏽" + "bc", strings.Repeat("a", 78) + "👋🏽" + "…"},
		{"an accent at the cut", strings.Repeat("a", 78) + "e\u0301" + "bc", strings.Repeat("a", 78) + "e\u0301" + "…"},
		{"control characters", "bell\x07 nul\x00 esc\x1b[31m", "bell nul esc[31m"},
		{"a right-to-left override", "invoice \u202efdp.exe", "invoice fdp.exe"},
		{"isolates", "a\u2066b\u2069c", "abc"},
		{"direction marks", "\u200fabc\u200e\u061c", "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := titleOf(tc.content); got != tc.want {
				t.Errorf("titleOf(%q) = %q, want %q", tc.content, got, tc.want)
			}
		})
	}
}
