package openai

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// splitText joins the pieces of a streamed text that some servers cut
// inside a character: an emoji sent as two surrogate escapes in two chunks
// ("\ud83d", then "\ude00"), or a UTF-8 sequence cut between its bytes.
// Each chunk decoded alone makes such a half U+FFFD for good: in the
// deltas, and in the transcript the model reads next. The zero value is
// ready to use.
type splitText struct {
	held string // the last piece's half character, as JSON string text
}

// piece is the text of a chunk's string member, from its raw JSON (raw)
// and as the chunk's decoder read it (decoded), less a half character at
// its end, which waits for the next piece; with the half the last piece
// held before it.
func (t *splitText) piece(raw, decoded string) string {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return decoded // null, or not a string
	}
	body := raw[1 : len(raw)-1]
	if t.held == "" && halfAtEnd(body) == 0 {
		return decoded
	}
	body = t.held + body
	t.held = ""
	if n := halfAtEnd(body); n > 0 {
		t.held, body = body[len(body)-n:], body[:len(body)-n]
	}
	var s string
	if json.Unmarshal([]byte(`"`+body+`"`), &s) != nil {
		return decoded
	}
	return s
}

// rest is a half character still held when the text ends: it never got
// its other half, and reads as U+FFFD.
func (t *splitText) rest() string {
	if t.held == "" {
		return ""
	}
	t.held = ""
	return string(utf8.RuneError)
}

// halfAtEnd is how many bytes at the end of the JSON string text body are
// half a character: a high surrogate's escape (\uD800 to \uDBFF, its
// backslash not itself escaped), or the first bytes of a UTF-8 sequence.
func halfAtEnd(body string) int {
	if n := len(body); n >= 6 && body[n-6] == '\\' && (body[n-5] == 'u' || body[n-5] == 'U') {
		slashes := 0
		for i := n - 6; i >= 0 && body[i] == '\\'; i-- {
			slashes++
		}
		if slashes%2 == 1 && highSurrogate(body[n-4:]) {
			return 6
		}
	}
	// A UTF-8 sequence's lead byte in the last three, with fewer bytes
	// after it than it announces.
	for i := len(body) - 1; i >= 0 && i >= len(body)-3; i-- {
		if c := body[i]; c >= 0xC0 {
			if !utf8.FullRuneInString(body[i:]) {
				return len(body) - i
			}
			return 0
		} else if c < 0x80 {
			return 0
		}
	}
	return 0
}

// highSurrogate says whether hex (four digits) is D800 to DBFF.
func highSurrogate(hex string) bool {
	h := strings.ToLower(hex)
	return len(h) == 4 && h[0] == 'd' && strings.ContainsRune("89ab", rune(h[1])) && isHex(h[2]) && isHex(h[3])
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
