package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clienttools/gateway/clip"
)

func TestTo(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"hello", -1, ""},
		{"", 3, ""},
		{"héllo", 2, "h"},         // é is 2 bytes: not split
		{"héllo", 3, "hé"},        // it fits whole
		{"日本語", 4, "日"},           // 3-byte characters
		{"日本語", 2, ""},            // not even the first fits
		{"a😀b", 4, "a"},           // a 4-byte character
		{"\xff\xfeab", 1, "\xff"}, // bytes that are not UTF-8 count alone
		{"0000000000\xab\xab\xab\xab", 13, "0000000000\xab\xab\xab"}, // stray continuation bytes too
	} {
		if got := clip.To(tc.s, tc.n); got != tc.want {
			t.Errorf("To(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestMarked(t *testing.T) {
	for _, tc := range []struct {
		s, mark string
		n       int
		want    string
	}{
		{"short", "...", 5, "short"},
		{"a longer text", "...", 8, "a longer..."},
		{"naïve text", "…", 3, "na…"},
	} {
		if got := clip.Marked(tc.s, tc.n, tc.mark); got != tc.want {
			t.Errorf("Marked(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.mark, got, tc.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 5, `"short"`},
		{"a \"longer\" text", 10, `"a \"longer\""...`},
		{"naïve", 3, `"na"...`},
	} {
		if got := clip.Quote(tc.s, tc.n); got != tc.want {
			t.Errorf("Quote(%q, %d) = %s, want %s", tc.s, tc.n, got, tc.want)
		}
	}
}

// FuzzTo: the cut is a prefix of at most n bytes, valid UTF-8 when s is,
// and drops less than one character's worth of what fits.
func FuzzTo(f *testing.F) {
	for _, s := range []string{"hello", "héllo", "日本語", "a😀b", "\xff\xfe"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := clip.To(s, n)
		if !strings.HasPrefix(s, got) {
			t.Fatalf("To(%q, %d) = %q: not a prefix", s, n, got)
		}
		if len(got) > max(n, 0) {
			t.Fatalf("To(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("To(%q, %d) = %q: split a character", s, n, got)
		}
		if n > 0 && len(s) > n && n-len(got) >= utf8.UTFMax {
			t.Fatalf("To(%q, %d) = %q: dropped %d bytes that fit", s, n, got, n-len(got))
		}
	})
}
