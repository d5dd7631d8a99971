package clip

import (
	"strconv"
	"unicode/utf8"
)

// To is s cut to at most n bytes, where a character starts: a character
// that would not fit whole is left out. s itself when it fits; "" when
// n <= 0. Bytes that are not UTF-8 count as characters of their own, as
// utf8.DecodeRuneInString reads them.
func To(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// The character s[n] is in starts at most UTFMax-1 bytes before it.
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if _, size := utf8.DecodeRuneInString(s[i:]); i < n && i+size > n {
			return s[:i] // it straddles the cut
		}
		break
	}
	return s[:n]
}

// Marked is s when it fits in n bytes, else To(s, n) followed by mark: the
// result may be longer than n by mark's length.
func Marked(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return To(s, n) + mark
}

// Quote is s quoted as Go quotes a string, cut to its first n bytes (then
// followed by ...): an error that names what a peer sent need not repeat
// all of it.
func Quote(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(To(s, n)) + "..."
}
