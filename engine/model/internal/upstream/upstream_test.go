package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
)

// stream is an answer whose body the test writes as the server would.
func stream(contentType string) (*http.Response, *io.PipeWriter) {
	r, w := io.Pipe()
	res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: r}
	if contentType != "" {
		res.Header.Set("Content-Type", contentType)
	}
	return res, w
}

// A watch ends its context once Idle passes without progress, with
// ErrStalled as its cause; progress starts the wait again.
func TestWatch(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	ctx, progress, stop := Limits{Idle: time.Minute, Clock: c}.Watch(context.Background())
	defer stop()
	c.Advance(40 * time.Second)
	progress()
	// The progress at 40 s moves the end to 100 s: at 60 s it waits on.
	c.Advance(20 * time.Second)
	if ctx.Err() != nil || c.Pending() != 1 {
		t.Fatalf("at 60 s, 20 s after progress: %v, %d timers; want the watch waiting", ctx.Err(), c.Pending())
	}
	c.Advance(40 * time.Second)
	err := Stalled(ctx, context.Canceled)
	if ctx.Err() == nil || !errors.Is(err, ErrStalled) || err.Error() != "the server sent nothing for 1m0s" {
		t.Errorf("after a minute without progress: %v, %v; want the context ended by ErrStalled", ctx.Err(), err)
	}
}

// stop ends a watch: its timer and its context, with no ErrStalled.
func TestWatchStop(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	ctx, _, stop := Limits{Idle: time.Minute, Clock: c}.Watch(context.Background())
	stop()
	c.Advance(time.Hour)
	if ctx.Err() == nil || c.Pending() != 0 || Stalled(ctx, nil) != nil {
		t.Errorf("after stop: %v, %d timers, %v; want the context ended, no timer, no ErrStalled", ctx.Err(), c.Pending(), Stalled(ctx, nil))
	}
}

// An answer larger than MaxBytes ends with ErrTooLarge once MaxBytes were
// read.
func TestGuardTooLarge(t *testing.T) {
	res, w := stream("text/event-stream")
	res, err := Limits{MaxBytes: 10}.Guard(res)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(w, strings.Repeat("x", 25))
		w.Close()
	}()
	got, err := io.ReadAll(res.Body)
	if len(got) != 10 || !errors.Is(err, ErrTooLarge) {
		t.Errorf("read %d bytes, %v; want 10, then ErrTooLarge", len(got), err)
	}
	res.Body.Close()

	// An answer of MaxBytes exactly is whole.
	exact, w2 := stream("text/event-stream")
	exact, _ = Limits{MaxBytes: 10}.Guard(exact)
	go func() {
		io.WriteString(w2, strings.Repeat("x", 10))
		w2.Close()
	}()
	if got, err := io.ReadAll(exact.Body); len(got) != 10 || err != nil {
		t.Errorf("an answer of MaxBytes: %d bytes, %v; want all, and its end", len(got), err)
	}
}

// An error status's body is read now, up to MaxErrorBody, and closed; a
// successful answer that is not an event stream is refused.
func TestGuardAnswers(t *testing.T) {
	closed := false
	big := strings.Repeat("e", MaxErrorBody+100)
	res := &http.Response{StatusCode: 500, Header: http.Header{}, Body: readCloser{strings.NewReader(big), &closed}}
	res, err := Limits{}.Guard(res)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if len(got) != MaxErrorBody || !closed {
		t.Errorf("error body: %d bytes read, closed %v; want %d, true", len(got), closed, MaxErrorBody)
	}

	for _, ct := range []string{"text/html; charset=utf-8", "application/json", "application/problem+json"} {
		closed = false
		res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: readCloser{strings.NewReader("<html>"), &closed}}
		if _, err := (Limits{}).Guard(res); !errors.Is(err, ErrNotEventStream) || !closed {
			t.Errorf("a 200 of %q: %v, closed %v; want ErrNotEventStream, closed", ct, err, closed)
		}
	}
	// JSON may say why: a proxy that answers its errors with 200.
	res = &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: readCloser{strings.NewReader(`{"error":{"message":"budget exceeded for this key"}}`), &closed}}
	if _, err := (Limits{}).Guard(res); !errors.Is(err, ErrNotEventStream) || !strings.Contains(err.Error(), "status 200: budget exceeded for this key)") {
		t.Errorf("a 200 of JSON that says why: %v, want its message", err)
	}

	// A stream labelled wrongly, or not at all, is read as one.
	for _, ct := range []string{"text/event-stream; charset=utf-8", "text/plain", ""} {
		closed = false
		res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: readCloser{strings.NewReader("data: 1\n\n"), &closed}}
		if _, err := (Limits{}).Guard(res); err != nil || closed {
			t.Errorf("a 200 of %q: %v, closed %v; want it read as a stream", ct, err, closed)
		}
	}
}

type readCloser struct {
	io.Reader
	closed *bool
}

func (r readCloser) Close() error { *r.closed = true; return nil }

func TestMessage(t *testing.T) {
	if got := Message("short"); got != "short" {
		t.Errorf("Message(short) = %q", got)
	}
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	got := Message(long)
	if len(got) > MaxMessage+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "é") {
		t.Errorf("Message of %d bytes: %d bytes, %q…", len(long), len(got), got[:8])
	}
	if trimmed := strings.TrimSuffix(got, "…"); strings.ToValidUTF8(trimmed, "?") != trimmed {
		t.Error("Message cut a character in two")
	}
}

func TestRedact(t *testing.T) {
	key := "sk-proj-AUDITSECREToai9876543210"
	for _, tt := range []struct{ in, want string }{
		{"Incorrect API key provided: " + key + ". You can find…", "Incorrect API key provided: [key]. You can find…"},
		{"key " + key[:20] + "… refused, and " + key + " again", "key [key]… refused, and [key] again"},
		{"masked: sk-proj-****3210", "masked: sk-proj-****3210"},
		{"its kind alone: " + key[:15], "its kind alone: " + key[:15]},
		{"nothing here", "nothing here"},
		{"its middle: " + key[5:25] + ".", "its middle: [key]."},
		{"its end, twice: " + key[10:] + key[10:], "its end, twice: [key][key]"},
	} {
		if got := Redact(tt.in, key); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Redact("short keys are left alone: abc", "abc"); got != "short keys are left alone: abc" {
		t.Errorf("a key under 16 bytes: %q", got)
	}
}

// TestTooLong: the refusals of a prompt longer than the model's context
// window, as APIs and servers word them, and answers that only look alike.
func TestTooLong(t *testing.T) {
	for _, tc := range []struct {
		status int
		msg    string
		body   string
		want   bool
	}{
		{400, "prompt is too long: 208310 tokens > 200000 maximum", "", true},
		{400, "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and try again", "", true},
		{400, "input is too long for requested model", "", true},
		{400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages.", "", true},
		{400, "Please reduce the length of the messages or completion.", `{"error":{"message":"Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{400, "the request exceeds the available context size, try increasing it", "", true},
		{500, "anything", `{"error":{"code":500,"message":"anything","type":"exceed_context_size_error"}}`, true},
		{400, "trying to submit 9000 tokens, exceeds the context window of 8192 (n_ctx)", "", true},
		{400, "prompt too long; exceeded max context length by 1200 tokens", "", true},
		{400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "", true},
		{0, "prompt is too long", "", true}, // an error event in the stream
		{400, "max_tokens must be at most the model's context length (8192)", "", false},
		{400, "Invalid parameter: 'context_size' must be a positive integer", "", false},
		{400, "messages: field required", "", false},
		{413, "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000.", "", false},
		{500, "prompt is too long", "", false}, // a server's own failure, whatever it says
		{429, "too many tokens per minute", "", false},
	} {
		if got := TooLong(tc.status, tc.msg, []byte(tc.body)); got != tc.want {
			t.Errorf("TooLong(%d, %q) = %t, want %t", tc.status, tc.msg, got, tc.want)
		}
	}
}
