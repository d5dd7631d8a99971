package fakeapi

import (
	"encoding/json"
	"testing"
)

// Itoa is n as a JSON number, for splicing into a frame.
func Itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Quote is s as a JSON string, for splicing into a frame.
func Quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// Decode parses a JSON literal of a test's expectation.
func Decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation: %v\n%s", err, s)
	}
	return v
}

// Pretty is v as indented JSON, for failure messages.
func Pretty(v any) string { b, _ := json.MarshalIndent(v, "", "  "); return string(b) }
