package openai

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// A stream that goes silent is cut off after StreamIdleTimeout, and not
// tried again.
func TestGenerateStalledStream(t *testing.T) {
	srv := newServer(t, reply{Events: []string{roleChunk(), textChunk("Let me"), ": keep-alive\n\n"}, Hold: true}, reply{Events: textTurn("again")})
	c := clock.NewFake(time.Unix(1000, 0))
	m, sl := newModel(t, srv, Options{StreamIdleTimeout: time.Minute, Clock: c})
	done := make(chan error, 1)
	text := make(chan struct{}, 1)
	go func() {
		_, err := m.Generate(context.Background(), request(), func(string) { text <- struct{}{} })
		done <- err
	}()
	select {
	case <-text:
	case <-time.After(10 * time.Second):
		t.Fatal("no text came")
	}
	c.Advance(time.Minute)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream silent past StreamIdleTimeout was not cut off")
	}
	var me *model.Error
	if !errors.As(err, &me) || !me.Truncated || !errors.Is(err, upstream.ErrStalled) {
		t.Fatalf("error = %v, want a truncated *model.Error wrapping upstream.ErrStalled", err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v: a stalled stream was tried again", srv.Requests(), sl.Got())
	}
}

// Errors a server sends in a stream that began with 200: one that refuses
// the request is not tried again, an overload is, and "error": null in
// every chunk is no error.
func TestGenerateStreamedErrors(t *testing.T) {
	nullError := func(ev string) string {
		return strings.Replace(ev, `"usage":null}`, `"usage":null,"error":null}`, 1)
	}
	tests := []struct {
		name     string
		events   []string
		requests int
		err      string
	}{
		{"a refused request (code 400)", []string{data(`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","code":400}}`)}, 1, "maximum context length"},
		{"an invalid request (type)", []string{data(`{"error":{"message":"bad tool schema","type":"invalid_request_error","code":null}}`)}, 1, "bad tool schema"},
		{"an overload", []string{errorChunk("overloaded")}, 2, ""},
		{"an error of null", []string{roleChunk(), nullError(textChunk("fine")), nullError(finishChunk("stop")), done()}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply{Events: tt.events}, reply{Events: textTurn("fine")})
			m, _ := newModel(t, srv, Options{})
			resp, _, err := fakeapi.Generate(t, m, request())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error = %v, want one saying %q", err, tt.err)
				}
			} else if err != nil || resp.Text != "fine" {
				t.Errorf("text %q, %v; want fine", resp.Text, err)
			}
			if srv.Requests() != tt.requests {
				t.Errorf("%d requests, want %d", srv.Requests(), tt.requests)
			}
		})
	}
}

// A turn cut by its token limit or a filter runs none of its calls: the
// stream does not say which ended before the cut ({} when no argument
// came yet).
func TestGenerateLengthRunsNoCall(t *testing.T) {
	for finish, stop := range map[string]string{"length": model.StopMaxTokens, "content_filter": model.StopContentFilter} {
		srv := newServer(t, reply{Events: []string{
			roleChunk(), callStart(0, "call_1", "delete_files"), callArgs(0, `{"path":`), finishChunk(finish), done(),
		}})
		m, _ := newModel(t, srv, Options{})
		resp, _, err := fakeapi.Generate(t, m, request())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolUses) != 0 || resp.StopReason != stop {
			t.Errorf("%s: tool uses %+v, stop %q; want none, %s", finish, resp.ToolUses, resp.StopReason, stop)
		}
	}
}

// A server that sends each whole call at index 0 with no ids gives as many
// calls, not one merged.
func TestGenerateCallsAtIndexZeroWithoutIDs(t *testing.T) {
	call := func(name, args string) string {
		return chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":`+quote(name)+`,"arguments":`+quote(args)+`}}]}`, "")
	}
	srv := newServer(t, reply{Events: []string{roleChunk(), call("a", `{"x":1}`), call("b", `{"y":2}`), finishChunk("tool_calls"), done()}})
	m, _ := newModel(t, srv, Options{})
	resp, _, err := fakeapi.Generate(t, m, request())
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]string
	for _, u := range resp.ToolUses {
		got = append(got, [2]string{u.Name, u.Arguments})
	}
	if want := [][2]string{{"a", `{"x":1}`}, {"b", `{"y":2}`}}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}

	// A server that repeats the name in every fragment of one call (and
	// no id after the first) gives one call, not one a fragment, the
	// first of them run as {}.
	srv = newServer(t, reply{Events: []string{roleChunk(), callStart(0, "call_1", "delete_files"),
		call("delete_files", `{"path":`), call("delete_files", `"/tmp/x"}`), finishChunk("tool_calls"), done()}})
	m, _ = newModel(t, srv, Options{})
	resp, _, err = fakeapi.Generate(t, m, request())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolUses) != 1 || resp.ToolUses[0].Arguments != `{"path":"/tmp/x"}` {
		t.Errorf("calls %+v, want one, delete_files {\"path\":\"/tmp/x\"}", resp.ToolUses)
	}
}

// A 200 that is not an event stream (a server that ignored "stream": true,
// a proxy's page) is said as such, once.
func TestGenerateNotAnEventStream(t *testing.T) {
	srv := newServer(t, reply{Events: []string{`{"choices":[]}`}, ContentType: "application/json"})
	m, sl := newModel(t, srv, Options{})
	_, _, err := fakeapi.Generate(t, m, request())
	if !errors.Is(err, upstream.ErrNotEventStream) || !strings.Contains(err.Error(), "application/json") {
		t.Errorf("error = %v, want upstream.ErrNotEventStream naming application/json", err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v, want one request", srv.Requests(), sl.Got())
	}
}

// An answer past MaxResponseBytes is cut off, and not asked for again.
func TestGenerateTooLarge(t *testing.T) {
	srv := newServer(t, reply{Events: textTurn(strings.Repeat("x", 4096))})
	m, sl := newModel(t, srv, Options{MaxResponseBytes: 1024})
	resp, _, err := fakeapi.Generate(t, m, request())
	if !errors.Is(err, upstream.ErrTooLarge) || len(resp.Text) != 0 {
		t.Errorf("text of %d bytes, %v; want upstream.ErrTooLarge", len(resp.Text), err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v, want one request", srv.Requests(), sl.Got())
	}
}

// A stream with CR line ends, whose last data: [DONE] has no blank line
// after it, is a whole turn, read once.
func TestGenerateLenientStream(t *testing.T) {
	var events []string
	for _, ev := range textTurn("fine") {
		events = append(events, strings.ReplaceAll(ev, "\n", "\r"))
	}
	events[len(events)-1] = "data: [DONE]\r"
	srv := newServer(t, reply{Events: events})
	m, _ := newModel(t, srv, Options{})
	resp, _, err := fakeapi.Generate(t, m, request())
	if err != nil || resp.Text != "fine" || srv.Requests() != 1 {
		t.Errorf("text %q, %v, after %d requests; want fine, at once", resp.Text, err, srv.Requests())
	}
}

// A refusal's words are the turn's text, and the stop says so; a filter's
// stop says so too.
func TestGenerateRefusal(t *testing.T) {
	srv := newServer(t, reply{Events: []string{
		roleChunk(), chunk(`{"refusal":"I can't "}`, ""), chunk(`{"refusal":"help with that."}`, ""), finishChunk("stop"), done(),
	}})
	m, _ := newModel(t, srv, Options{})
	resp, deltas, err := fakeapi.Generate(t, m, request())
	if err != nil || resp.Text != "I can't help with that." || resp.StopReason != model.StopRefusal || len(deltas) != 2 {
		t.Errorf("text %q, stop %q, deltas %q, %v; want the refusal's words streamed, stop refusal", resp.Text, resp.StopReason, deltas, err)
	}
}

// An API that quotes the key it refused does not pass it on.
func TestGenerateErrorQuotesTheKey(t *testing.T) {
	key := "sk-proj-0123456789abcdefghij"
	srv := newServer(t, reply{Status: 401, Body: errorBody("Incorrect API key provided: " + key + ".")})
	m, _ := newModel(t, srv, Options{APIKey: key})
	_, _, err := fakeapi.Generate(t, m, request())
	if err == nil || strings.Contains(err.Error(), key[:16]) || !strings.Contains(err.Error(), "provided: [key].") {
		t.Errorf("error = %v, want the key said as [key]", err)
	}
}

// TestGenerateTooLongInStream: vLLM and LiteLLM refuse a prompt longer than
// the model's context window in a stream that began with 200: it says so
// (model.ErrTooLong), as a refusal before the stream does.
func TestGenerateTooLongInStream(t *testing.T) {
	chunk := data(`{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages.","type":"BadRequestError","param":null,"code":400}}`)
	srv := newServer(t, reply{Events: []string{chunk}})
	m, _ := newModel(t, srv, Options{})
	_, _, err := fakeapi.Generate(t, m, request())
	if !errors.Is(err, model.ErrTooLong) || !strings.Contains(err.Error(), "start a new chat") {
		t.Errorf("error %v: want ErrTooLong, saying to start a new chat", err)
	}
}
