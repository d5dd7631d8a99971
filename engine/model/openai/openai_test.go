package openai

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
)

// request is a streamed one-message turn.
func request() model.Request { return fakeapi.Request("gpt-test") }

func TestGenerateStreamsTextInOrder(t *testing.T) {
	seen := make(chan struct{})
	srv := newServer(t, reply{
		Events: textTurn("Hel", "lo, ", "world", "!"),
		// After the first text the server waits until the client has shown
		// it: proof that deltas are forwarded as they arrive, not at the end.
		Gate: map[int]chan struct{}{1: seen},
	})
	m, _ := newModel(t, srv, Options{})
	var deltas []string
	resp, err := m.Generate(context.Background(), request(), func(s string) {
		if len(deltas) == 0 {
			close(seen)
		}
		deltas = append(deltas, s)
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if want := []string{"Hel", "lo, ", "world", "!"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	want := model.Response{Text: "Hello, world!", StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 9, OutputTokens: 12}}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v, want %+v", resp, want)
	}
}

func TestGenerateWithoutStreamCallsOnDeltaOnce(t *testing.T) {
	srv := newServer(t, reply{Events: textTurn("a", "b", "c")})
	m, _ := newModel(t, srv, Options{})
	req := request()
	req.Stream = false
	resp, deltas, err := fakeapi.Generate(t, m, req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if want := []string{"abc"}; !reflect.DeepEqual(deltas, want) || resp.Text != "abc" {
		t.Errorf("deltas = %q, text %q, want %q", deltas, resp.Text, want)
	}
}

func TestGenerateToolCalls(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   []model.ToolUse
		stop   string
	}{
		{
			name: "two parallel calls with interleaved fragments",
			events: []string{
				roleChunk(),
				callStart(0, "call_A", "get_weather"),
				callArgs(0, `{"ci`),
				callStart(1, "call_B", "get_weather"),
				callArgs(1, `{"city": "Par`),
				callArgs(0, `ty": "Tokyo"}`),
				callArgs(1, `is"}`),
				finishChunk("tool_calls"), usageChunk(20, 30), done(),
			},
			want: []model.ToolUse{
				{ID: "call_A", Name: "get_weather", Arguments: `{"city": "Tokyo"}`},
				{ID: "call_B", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			},
			stop: model.StopToolUse,
		},
		{
			name: "malformed arguments kept verbatim",
			events: []string{
				roleChunk(), callStart(0, "call_A", "get_weather"), callArgs(0, `{"city": Tokyo`), callArgs(0, `,,}`),
				finishChunk("tool_calls"), done(),
			},
			want: []model.ToolUse{{ID: "call_A", Name: "get_weather", Arguments: `{"city": Tokyo,,}`}},
			stop: model.StopToolUse,
		},
		{
			name: "no arguments: {}; finish_reason stop with calls is still tool use",
			events: []string{
				roleChunk(), callStart(0, "call_A", "get_local_time"), finishChunk("stop"), done(),
			},
			want: []model.ToolUse{{ID: "call_A", Name: "get_local_time", Arguments: "{}"}},
			stop: model.StopToolUse,
		},
		{
			name: "whole calls all at index 0 (older Ollama)",
			events: []string{
				chunk(`{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"b","arguments":"{}"}}]}`, ""),
				finishChunk("tool_calls"), done(),
			},
			want: []model.ToolUse{
				{ID: "call_1", Name: "a", Arguments: `{"x":1}`},
				{ID: "call_2", Name: "b", Arguments: `{}`},
			},
			stop: model.StopToolUse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply{Events: tt.events})
			m, _ := newModel(t, srv, Options{})
			resp, _, err := fakeapi.Generate(t, m, request())
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if !reflect.DeepEqual(resp.ToolUses, tt.want) {
				t.Errorf("tool uses = %+v\nwant %+v", resp.ToolUses, tt.want)
			}
			if resp.StopReason != tt.stop {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, tt.stop)
			}
		})
	}
}

func TestGenerateSynthesizesMissingCallIDs(t *testing.T) {
	srv := newServer(t, reply{Events: []string{
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"a","arguments":"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"b","arguments":"{}"}}]}`, ""),
		finishChunk("tool_calls"), done(),
	}})
	m, _ := newModel(t, srv, Options{})
	resp, _, err := fakeapi.Generate(t, m, request())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if len(resp.ToolUses) != 2 {
		t.Fatalf("tool uses = %+v, want 2", resp.ToolUses)
	}
	a, b := resp.ToolUses[0].ID, resp.ToolUses[1].ID
	if !strings.HasPrefix(a, "call_") || !strings.HasPrefix(b, "call_") || a == b {
		t.Errorf("ids = %q, %q; want distinct call_ ids", a, b)
	}
}

func TestGenerateStopReasons(t *testing.T) {
	tests := []struct{ api, want string }{
		{"stop", model.StopEndTurn},
		{"content_filter", model.StopContentFilter},
		{"length", model.StopMaxTokens},
		{"tool_calls", model.StopToolUse},
		{"function_call", model.StopToolUse},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			srv := newServer(t, reply{Events: []string{roleChunk(), textChunk("x"), finishChunk(tt.api), done()}})
			m, _ := newModel(t, srv, Options{})
			resp, _, err := fakeapi.Generate(t, m, request())
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.StopReason != tt.want {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, tt.want)
			}
		})
	}
}

func TestGenerateRetries(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := reply{Events: textTurn("fine")}
	tests := []struct {
		name     string
		replies  []reply
		opts     Options
		requests int
		waits    []time.Duration // nil: any backoff, one per retry
		status   int             // of the *model.Error; 0: success
		message  string
		tooLong  bool // the *model.Error is ErrTooLong
	}{
		{
			name: "429 with retry-after seconds",
			replies: []reply{
				{Status: 429, Header: map[string]string{"retry-after": "7"}, Body: errorBody("Rate limit reached for requests")},
				ok,
			},
			requests: 2,
			waits:    []time.Duration{7 * time.Second},
		},
		{
			name: "429 with retry-after-ms",
			replies: []reply{
				{Status: 429, Header: map[string]string{"retry-after-ms": "1500"}, Body: errorBody("slow down")},
				ok,
			},
			requests: 2,
			waits:    []time.Duration{1500 * time.Millisecond},
		},
		{
			name: "429 with retry-after as an HTTP date",
			replies: []reply{
				{Status: 429, Header: map[string]string{"retry-after": now.Add(12 * time.Second).Format(http.TimeFormat)}, Body: errorBody("slow down")},
				ok,
			},
			opts:     Options{Now: func() time.Time { return now }},
			requests: 2,
			waits:    []time.Duration{12 * time.Second},
		},
		{
			name:     "503 overloaded then success",
			replies:  []reply{{Status: 503, Body: errorBody("The engine is currently overloaded, please try again later")}, ok},
			requests: 2,
		},
		{
			name:     "error chunk before any text then success",
			replies:  []reply{{Events: []string{roleChunk(), errorChunk("The server had an error while processing your request.")}}, ok},
			requests: 2,
		},
		{
			name:     "always 500 gives up after MaxRetries",
			replies:  []reply{{Status: 500, Body: errorBody("The server had an error")}},
			opts:     Options{MaxRetries: 2},
			requests: 3,
			status:   500,
			message:  "The server had an error",
		},
		{
			name:     "default bound is 3 retries",
			replies:  []reply{{Status: 502, Body: "Bad Gateway"}},
			requests: 4,
			status:   502,
			message:  "Bad Gateway",
		},
		{
			name:     "retry-after beyond MaxRetryWait: give up at once",
			replies:  []reply{{Status: 429, Header: map[string]string{"retry-after": "3600"}, Body: errorBody("come back in an hour")}, ok},
			requests: 1,
			waits:    []time.Duration{},
			status:   429,
			message:  "come back in an hour",
		},
		{
			name:     "401 is not retried",
			replies:  []reply{{Status: 401, Body: errorBody("Incorrect API key provided: sk-proj-****cret.")}},
			requests: 1,
			waits:    []time.Duration{},
			status:   401,
			message:  "Incorrect API key provided: sk-proj-****cret.",
		},
		{
			name:     "404 with a string error (llama.cpp style)",
			replies:  []reply{{Status: 404, Body: `{"error":"model 'llama9' not found"}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   404,
			message:  "model 'llama9' not found",
		},
		{
			name:     "400 with a vLLM-style body",
			replies:  []reply{{Status: 400, Body: `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "max_tokens is too large",
		},
		{
			name:     "OpenAI's context_length_exceeded",
			replies:  []reply{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
			tooLong:  true,
		},
		{
			name:     "llama.cpp's context size",
			replies:  []reply{{Status: 400, Body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "the request exceeds the available context size, try increasing it",
			tooLong:  true,
		},
		{
			name:     "vLLM's maximum context length",
			replies:  []reply{{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages.","type":"BadRequestError","code":400}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages.",
			tooLong:  true,
		},
		{
			name:     "422 with a FastAPI detail",
			replies:  []reply{{Status: 422, Body: `{"detail":"messages: field required"}`}},
			requests: 1,
			waits:    []time.Duration{},
			status:   422,
			message:  "messages: field required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.replies...)
			m, sl := newModel(t, srv, tt.opts)
			resp, deltas, err := fakeapi.Generate(t, m, request())
			if got := srv.Requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
			waits := sl.Got()
			switch {
			case tt.waits != nil:
				if len(waits) != len(tt.waits) || (len(waits) > 0 && !reflect.DeepEqual(waits, tt.waits)) {
					t.Errorf("waits = %v, want %v", waits, tt.waits)
				}
			case len(waits) != tt.requests-1:
				t.Errorf("waits = %v, want one per retry (%d)", waits, tt.requests-1)
			}
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("Generate: %v", err)
				}
				if resp.Text != "fine" || !reflect.DeepEqual(deltas, []string{"fine"}) {
					t.Errorf("text %q, deltas %q, want the second attempt's alone", resp.Text, deltas)
				}
				return
			}
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("error = %v (%T), want *model.Error", err, err)
			}
			want := &model.Error{Provider: Provider, Status: tt.status, Message: tt.message, TooLong: tt.tooLong}
			if !reflect.DeepEqual(me, want) {
				t.Errorf("error = %+v, want %+v", me, want)
			}
			if errors.Is(err, model.ErrTooLong) != tt.tooLong || (tt.tooLong && !strings.Contains(err.Error(), ": start a new chat (")) {
				t.Errorf("error %q: ErrTooLong %t, want %t, saying to start a new chat", err, errors.Is(err, model.ErrTooLong), tt.tooLong)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error text %q contains the API key", err)
			}
			if len(resp.ToolUses) != 0 || resp.StopReason != model.StopError {
				t.Errorf("response = %+v, want no tool uses and stop reason %q", resp, model.StopError)
			}
		})
	}
}

func TestGenerateTruncated(t *testing.T) {
	partial := []string{
		roleChunk(), textChunk("Let me "), textChunk("check."),
		callStart(0, "call_A", "get_weather"), callArgs(0, `{"city": "Tok`),
	}
	tests := []struct {
		name    string
		reply   reply
		message string
	}{
		{"connection ends without [DONE]", reply{Events: partial}, "the stream ended before data: [DONE]"},
		{"finish_reason but no [DONE]", reply{Events: append(append([]string(nil), partial...), finishChunk("tool_calls"))}, "the stream ended before data: [DONE]"},
		{"connection dropped", reply{Events: partial, Abort: true}, ""},
		{"error chunk mid-stream", reply{Events: append(append([]string(nil), partial...), errorChunk("The server had an error"))}, "The server had an error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.reply, reply{Events: textTurn("replayed")})
			m, sl := newModel(t, srv, Options{})
			resp, deltas, err := fakeapi.Generate(t, m, request())
			var me *model.Error
			if !errors.As(err, &me) || !me.Truncated || me.Provider != Provider {
				t.Fatalf("error = %#v, want a truncated *model.Error", err)
			}
			if tt.message != "" && me.Message != tt.message {
				t.Errorf("message = %q, want %q", me.Message, tt.message)
			}
			if resp.Text != "Let me check." || resp.ToolUses != nil || resp.StopReason != model.StopError {
				t.Errorf("response = %+v, want the text so far, no tool uses, stop reason error", resp)
			}
			if want := []string{"Let me ", "check."}; !reflect.DeepEqual(deltas, want) {
				t.Errorf("deltas = %q, want %q", deltas, want)
			}
			// Text was shown, so the turn is not replayed.
			if srv.Requests() != 1 || len(sl.Got()) != 0 {
				t.Errorf("requests = %d, waits %v: a turn with text shown was retried", srv.Requests(), sl.Got())
			}
		})
	}
}

func TestGenerateRetriesCutBeforeAnyText(t *testing.T) {
	// A tool call cut in half showed the user nothing: retrying loses nothing.
	srv := newServer(t,
		reply{Events: []string{roleChunk(), callStart(0, "call_A", "get_weather"), callArgs(0, `{"ci`)}, Abort: true},
		reply{Events: textTurn("ok")},
	)
	m, sl := newModel(t, srv, Options{})
	req := request()
	var heard []model.Retry
	req.OnRetry = func(r model.Retry) { heard = append(heard, r) }
	resp, _, err := fakeapi.Generate(t, m, req)
	if err != nil || resp.Text != "ok" || srv.Requests() != 2 || len(sl.Got()) != 1 {
		t.Errorf("resp %+v, err %v, requests %d, waits %v; want a retry then ok", resp, err, srv.Requests(), sl.Got())
	}
	// The request hears of the retry, before its wait: the page says why the turn is quiet.
	var me *model.Error
	if len(heard) != 1 || heard[0].Attempt != 1 || heard[0].Attempts != 4 || heard[0].Wait != sl.Got()[0] || !errors.As(heard[0].Err, &me) || !me.Truncated {
		t.Errorf("OnRetry heard %+v, want attempt 1 of 4, the wait slept, the cut stream's error", heard)
	}
}

func TestGenerateCancelled(t *testing.T) {
	srv := newServer(t, reply{
		Events: []string{roleChunk(), textChunk("partial"), textChunk(" never")},
		Gate:   map[int]chan struct{}{1: make(chan struct{})}, // hold the stream open
	})
	m, _ := newModel(t, srv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := m.Generate(ctx, request(), func(string) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if resp.Text != "partial" || resp.StopReason != model.StopCancelled || resp.ToolUses != nil {
		t.Errorf("response = %+v, want the partial text, stop reason cancelled", resp)
	}
}

func TestGenerateKey(t *testing.T) {
	tests := []struct {
		name, key, want string
	}{
		{"with a key", testKey, "Bearer " + testKey},
		{"a local server without one", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The SDK would read OPENAI_API_KEY from the environment and send
			// it to a local server; this package must not.
			t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
			t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
			srv := newServer(t, reply{Events: textTurn("x")})
			sl := &sleeper{}
			m, err := New(Options{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(), APIKey: tt.key, Sleep: sl.Sleep})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := fakeapi.Generate(t, m, request()); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got := srv.Header(0).Get("Authorization"); got != tt.want {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"localhost:8080/v1", "ftp://x", "http://"} {
		if _, err := New(Options{BaseURL: u}); err == nil {
			t.Errorf("New(BaseURL %q) succeeded, want an error", u)
		}
	}
}

func TestGenerateConcurrent(t *testing.T) {
	// One Model serves every session at once.
	srv := newServer(t, reply{Events: textTurn("same ", "answer")})
	m, _ := newModel(t, srv, Options{})
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			var text string
			resp, err := m.Generate(context.Background(), request(), func(s string) { text += s })
			if err == nil && (resp.Text != "same answer" || text != resp.Text) {
				err = errors.New("wrong turn: " + resp.Text + " / " + text)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := srv.Requests(); got != n {
		t.Errorf("requests = %d, want %d", got, n)
	}
}
