package anthropic

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
func request() model.Request { return fakeapi.Request("claude-test") }

func TestGenerateStreamsTextInOrder(t *testing.T) {
	seen := make(chan struct{})
	srv := newServer(t, reply{
		Events: textTurn("Hel", "lo, ", "world", "!"),
		// After the first delta the server waits until the client has shown
		// it: proof that deltas are forwarded as they arrive, not at the end.
		Gate: map[int]chan struct{}{3: seen},
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
	want := model.Response{Text: "Hello, world!", StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}
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

func TestGenerateToolUses(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   []model.ToolUse
	}{
		{
			name: "two parallel tool uses with fragmented arguments",
			events: []string{
				messageStart(30), textStart(0), textDelta(0, "Checking both."), blockStop(0),
				toolStart(1, "toolu_01", "get_weather", "{}"),
				jsonDelta(1, ""), jsonDelta(1, `{"ci`), jsonDelta(1, `ty": "Tok`), jsonDelta(1, `yo"}`),
				blockStop(1),
				toolStart(2, "toolu_02", "get_weather", "{}"),
				jsonDelta(2, `{"city":`), ping(), jsonDelta(2, ` "Paris"}`),
				blockStop(2),
				messageDelta("tool_use", 40), messageStop(),
			},
			want: []model.ToolUse{
				{ID: "toolu_01", Name: "get_weather", Arguments: `{"city": "Tokyo"}`},
				{ID: "toolu_02", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			},
		},
		{
			name: "malformed arguments kept verbatim",
			events: []string{
				messageStart(30), toolStart(0, "toolu_01", "get_weather", "{}"),
				jsonDelta(0, `{"city": "Tok`), jsonDelta(0, `yo", }}`), blockStop(0),
				messageDelta("tool_use", 9), messageStop(),
			},
			want: []model.ToolUse{{ID: "toolu_01", Name: "get_weather", Arguments: `{"city": "Tokyo", }}`}},
		},
		{
			name: "no deltas: the block's input",
			events: []string{
				messageStart(30), toolStart(0, "toolu_01", "get_weather", `{"city":"Oslo"}`), blockStop(0),
				messageDelta("tool_use", 9), messageStop(),
			},
			want: []model.ToolUse{{ID: "toolu_01", Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
		},
		{
			name: "no deltas and no input: {}",
			events: []string{
				messageStart(30), toolStart(0, "toolu_01", "get_local_time", "{}"), jsonDelta(0, ""), blockStop(0),
				toolStart(1, "toolu_02", "get_local_time", "null"), blockStop(1),
				messageDelta("tool_use", 9), messageStop(),
			},
			want: []model.ToolUse{
				{ID: "toolu_01", Name: "get_local_time", Arguments: "{}"},
				{ID: "toolu_02", Name: "get_local_time", Arguments: "{}"},
			},
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
			if resp.StopReason != model.StopToolUse {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, model.StopToolUse)
			}
		})
	}
}

func TestGenerateStopReasons(t *testing.T) {
	tests := []struct{ api, want string }{
		{"end_turn", model.StopEndTurn},
		{"stop_sequence", model.StopEndTurn},
		{"refusal", model.StopRefusal},
		{"pause_turn", model.StopEndTurn},
		{"tool_use", model.StopToolUse},
		{"max_tokens", model.StopMaxTokens},
		{"model_context_window_exceeded", model.StopMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			srv := newServer(t, reply{Events: []string{
				messageStart(1), textStart(0), textDelta(0, "x"), blockStop(0), messageDelta(tt.api, 2), messageStop(),
			}})
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

// TestStopReasonOfATurnWithCalls: a turn that ends with whole tool uses
// under a reason other than tool_use (one the API adds later, end_turn)
// says tool_use, as the OpenAI adapter says of any turn that ends with
// calls: they run, and their results prompt the model again. It said
// end_turn, "the model finished its reply".
func TestStopReasonOfATurnWithCalls(t *testing.T) {
	for _, api := range []string{"brand_new_reason", "end_turn", "pause_turn"} {
		t.Run(api, func(t *testing.T) {
			srv := newServer(t, reply{Events: []string{
				messageStart(1), toolStart(0, "toolu_1", "get_weather", "{}"), jsonDelta(0, `{"city":"Tokyo"}`), blockStop(0), messageDelta(api, 2), messageStop(),
			}})
			m, _ := newModel(t, srv, Options{})
			resp, _, err := fakeapi.Generate(t, m, request())
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if len(resp.ToolUses) != 1 || resp.StopReason != model.StopToolUse {
				t.Errorf("%d tool uses, stop reason %q; want 1 and %q", len(resp.ToolUses), resp.StopReason, model.StopToolUse)
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
				{Status: 429, Header: map[string]string{"retry-after": "7"}, Body: errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
				ok,
			},
			requests: 2,
			waits:    []time.Duration{7 * time.Second},
		},
		{
			name: "429 with retry-after-ms",
			replies: []reply{
				{Status: 429, Header: map[string]string{"retry-after-ms": "1500", "retry-after": "2"}, Body: errorBody("rate_limit_error", "slow down")},
				ok,
			},
			requests: 2,
			waits:    []time.Duration{1500 * time.Millisecond},
		},
		{
			name: "429 with retry-after as an HTTP date",
			replies: []reply{
				{Status: 429, Header: map[string]string{"retry-after": now.Add(12 * time.Second).Format(http.TimeFormat)}, Body: errorBody("rate_limit_error", "slow down")},
				ok,
			},
			opts:     Options{Now: func() time.Time { return now }},
			requests: 2,
			waits:    []time.Duration{12 * time.Second},
		},
		{
			name: "529 overloaded then success",
			replies: []reply{
				{Status: 529, Body: errorBody("overloaded_error", "Overloaded")},
				ok,
			},
			requests: 2,
		},
		{
			name: "overloaded event before any delta then success",
			replies: []reply{
				{Events: []string{messageStart(1), errorEvent("overloaded_error", "Overloaded")}},
				ok,
			},
			requests: 2,
		},
		{
			name:     "always 500 gives up after MaxRetries",
			replies:  []reply{{Status: 500, Body: errorBody("api_error", "Internal server error")}},
			opts:     Options{MaxRetries: 2},
			requests: 3,
			status:   500,
			message:  "Internal server error",
		},
		{
			name:     "default bound is 3 retries",
			replies:  []reply{{Status: 503, Body: errorBody("api_error", "unavailable")}},
			requests: 4,
			status:   503,
			message:  "unavailable",
		},
		{
			name:     "negative MaxRetries: no retry",
			replies:  []reply{{Status: 529, Body: errorBody("overloaded_error", "Overloaded")}},
			opts:     Options{MaxRetries: -1},
			requests: 1,
			status:   529,
			message:  "Overloaded",
		},
		{
			name:     "retry-after beyond MaxRetryWait: give up at once",
			replies:  []reply{{Status: 429, Header: map[string]string{"retry-after": "3600"}, Body: errorBody("rate_limit_error", "come back in an hour")}, ok},
			requests: 1,
			waits:    []time.Duration{},
			status:   429,
			message:  "come back in an hour",
		},
		{
			name:     "401 is not retried",
			replies:  []reply{{Status: 401, Body: errorBody("authentication_error", "invalid x-api-key")}},
			requests: 1,
			waits:    []time.Duration{},
			status:   401,
			message:  "invalid x-api-key",
		},
		{
			name:     "400 is not retried",
			replies:  []reply{{Status: 400, Body: errorBody("invalid_request_error", "messages: field required")}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "messages: field required",
		},
		{
			name:     "a prompt longer than the context window is not retried, and says so",
			replies:  []reply{{Status: 400, Body: errorBody("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")}},
			requests: 1,
			waits:    []time.Duration{},
			status:   400,
			message:  "prompt is too long: 208310 tokens > 200000 maximum",
			tooLong:  true,
		},
		{
			name:     "error body that is not JSON",
			replies:  []reply{{Status: 403, Body: "<html>forbidden</html>"}},
			requests: 1,
			waits:    []time.Duration{},
			status:   403,
			message:  "Forbidden",
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
			for _, w := range waits {
				if w < 0 || w > DefaultMaxRetryWait {
					t.Errorf("wait %v out of bounds", w)
				}
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
			want := model.Error{Provider: Provider, Status: tt.status, Message: tt.message, TooLong: tt.tooLong}
			if got := *me; got.Err == nil || !reflect.DeepEqual(got, model.Error{Provider: want.Provider, Status: want.Status, Message: want.Message, TooLong: want.TooLong, Err: got.Err}) {
				t.Errorf("error = %+v, want %+v and the SDK's error underneath", got, want)
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
		messageStart(10), textStart(0), textDelta(0, "Let me "), textDelta(0, "check."), blockStop(0),
		toolStart(1, "toolu_01", "get_weather", "{}"), jsonDelta(1, `{"city": "Tok`),
	}
	tests := []struct {
		name    string
		reply   reply
		message string
	}{
		{"connection ends without message_stop", reply{Events: partial}, "the stream ended before message_stop"},
		{"connection dropped", reply{Events: partial, Abort: true}, ""},
		{"error event mid-stream", reply{Events: append(partial, errorEvent("overloaded_error", "Overloaded"))}, "Overloaded"},
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
		reply{Events: []string{messageStart(10), toolStart(0, "toolu_01", "get_weather", "{}"), jsonDelta(0, `{"ci`)}, Abort: true},
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
	seen := make(chan struct{})
	srv := newServer(t, reply{
		Events: []string{messageStart(1), textStart(0), textDelta(0, "partial"), textDelta(0, " never")},
		Gate:   map[int]chan struct{}{2: make(chan struct{})}, // hold the stream open
	})
	m, _ := newModel(t, srv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := m.Generate(ctx, request(), func(string) {
		close(seen)
		cancel()
	})
	<-seen
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if resp.Text != "partial" || resp.StopReason != model.StopCancelled || resp.ToolUses != nil {
		t.Errorf("response = %+v, want the partial text, stop reason cancelled", resp)
	}
}

func TestGenerateSendsKeyAndStream(t *testing.T) {
	srv := newServer(t, reply{Events: textTurn("x")})
	m, _ := newModel(t, srv, Options{})
	if _, _, err := fakeapi.Generate(t, m, request()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	h := srv.Header(0)
	if got := h.Get("Authorization") + h.Get("X-Api-Key"); !strings.Contains(got, testKey) {
		t.Errorf("the API key was not sent (Authorization %q, X-Api-Key %q)", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
	if h.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	if got := srv.Body(0)["stream"]; got != true {
		t.Errorf("stream = %v, want true", got)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"api.anthropic.com", "ftp://x", "http://"} {
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
