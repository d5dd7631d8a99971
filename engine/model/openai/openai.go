package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/retry"
	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// Provider names this package in a *model.Error.
const Provider = "openai"

// DefaultBaseURL is OpenAI's own API. A local server's base URL ends in /v1
// the same way, e.g. http://localhost:8080/v1 for llama.cpp.
const DefaultBaseURL = "https://api.openai.com/v1"

// Retry defaults. They are small because a person is waiting for the turn:
// a few quick retries absorb a transient overload, a long outage should be
// reported, not hidden behind minutes of silence.
const (
	DefaultMaxRetries   = retry.DefaultMaxRetries
	DefaultMaxRetryWait = retry.DefaultMaxWait
)

// DefaultStreamIdleTimeout is Options.StreamIdleTimeout's default: a local
// server may think that long over a big prompt before its first token.
const DefaultStreamIdleTimeout = upstream.DefaultIdle

// Options configure a Model. The zero value of every field means its default.
type Options struct {
	// BaseURL is the API's root, the URL that ends in /v1; default
	// DefaultBaseURL. The key is sent to it, so point it only at a server you
	// trust.
	BaseURL string
	// APIKey is sent as a bearer token and never logged or copied into an
	// error. Empty sends none, which local servers usually accept.
	APIKey string
	// HTTPClient sends the requests; default upstream.HTTPClient. Do not
	// give it a Client.Timeout: that bounds the whole stream and would cut
	// long turns off; StreamIdleTimeout (from the request on, headers
	// included: a local server may think minutes over a big prompt) and
	// MaxResponseBytes bound it, whatever the client.
	HTTPClient *http.Client
	// MaxRetries bounds the retries after the first attempt; zero means
	// DefaultMaxRetries, negative means none. Each retry can cost the user
	// seconds of waiting, so a large number hides outages rather than riding
	// them out.
	MaxRetries int
	// MaxRetryWait bounds a turn's waits between attempts together (the
	// server's retry-after, or the backoff): when the next wait would pass
	// it, the error is returned at once rather than leaving the session
	// silent. Default DefaultMaxRetryWait.
	MaxRetryWait time.Duration
	// MaxTokensField names the body field that carries Request.MaxTokens:
	// "max_completion_tokens" or "max_tokens". Default: the first for OpenAI
	// itself (api.openai.com), whose reasoning models reject the old name, and
	// the second for any other server, since older local servers know only it
	// and would silently ignore the new one. Nothing is sent when
	// Request.MaxTokens is zero: the server chooses.
	MaxTokensField string
	// Sleep waits between attempts; default a timer that gives up when ctx is
	// done. Tests inject one that records the wait and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now turns a retry-after given as an HTTP date into a wait; default
	// time.Now.
	Now func() time.Time
	// StreamIdleTimeout cuts a turn off whose stream sends no event
	// (comments do not count) for this long, from the request on; default
	// upstream.DefaultIdle (10 min, as long as a local server may think
	// over a big prompt).
	StreamIdleTimeout time.Duration
	// MaxResponseBytes cuts an answer off past this many bytes; default
	// upstream.DefaultMaxBytes (64 MiB).
	MaxResponseBytes int64
	// Clock times StreamIdleTimeout; default the system's.
	Clock clock.Clock
	// Logger hears of each retry; nil: none.
	Logger *slog.Logger
}

// Model is a Chat Completions server. Build it with New.
type Model struct {
	client              sdk.Client
	retry               retry.Policy
	maxCompletionTokens bool // send max_completion_tokens, not max_tokens
	now                 func() time.Time
	limits              upstream.Limits
}

var _ model.Model = (*Model)(nil)

// New builds a Model. It fails only on a BaseURL that is not an http(s) URL,
// so a typo is caught at startup rather than at the first turn.
func New(opts Options) (*Model, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := checkURL(base)
	if err != nil {
		return nil, fmt.Errorf("openai: bad base URL: %w", err)
	}
	var completionTokens bool
	switch opts.MaxTokensField {
	case "":
		completionTokens = u.Hostname() == "api.openai.com"
	case "max_completion_tokens":
		completionTokens = true
	case "max_tokens":
	default:
		return nil, fmt.Errorf("openai: MaxTokensField is %q, want max_tokens or max_completion_tokens", opts.MaxTokensField)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = upstream.HTTPClient()
	}
	limits := upstream.Limits{Idle: opts.StreamIdleTimeout, MaxBytes: opts.MaxResponseBytes, Clock: opts.Clock}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		// Retries are ours: the SDK's sleep cannot be injected, and it cannot
		// know whether text has already reached the user.
		option.WithMaxRetries(0),
		option.WithMiddleware(statusErrors(limits)),
	}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(opts.APIKey))
	}
	m := &Model{
		// Not sdk.NewClient: it reads OPENAI_* from the environment, and a key
		// found there would be sent to whatever local server BaseURL names.
		// The providers package owns the environment.
		client: sdk.Client{Options: reqOpts},
		retry: retry.Policy{
			Provider:   Provider,
			MaxRetries: opts.MaxRetries,
			MaxWait:    opts.MaxRetryWait,
			Sleep:      opts.Sleep,
			Logger:     opts.Logger,
			Secret:     opts.APIKey,
		},
		maxCompletionTokens: completionTokens,
		now:                 opts.Now,
		limits:              limits,
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// Generate streams one assistant turn. Retryable failures (429, 5xx, a
// connection that fails or a stream that errors before any text) are retried
// only while no text has reached onDelta, so the user never sees a sentence
// twice.
func (m *Model) Generate(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	params := m.params(req)
	return retry.Loop(ctx, m.retry, req, onDelta, func(ctx context.Context, emit func(string)) (model.Response, *retry.Failure) {
		return m.attempt(ctx, params, emit)
	})
}

// streamFailed is a stream that failed with msg: cut off mid-turn when
// another try may pass, else the server refused the request (a prompt too
// long), which is no cut.
func streamFailed(msg string, retryable bool) *retry.Failure {
	return &retry.Failure{Err: &model.Error{Provider: Provider, Message: upstream.Message(msg), Truncated: retryable}, Retryable: retryable}
}

// attempt sends the request once and reads its stream to data: [DONE].
func (m *Model) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, emit func(string)) (model.Response, *retry.Failure) {
	var acc accumulator
	ctx, progress, stop := m.limits.Watch(ctx)
	defer stop()
	// Post rather than Chat.Completions.NewStreaming: the SDK's stream ends
	// the same way on [DONE] and on a connection that just closes, and only
	// the first is a whole turn.
	var res *http.Response
	err := m.client.Post(ctx, "chat/completions", params, &res, option.WithJSONSet("stream", true))
	if err != nil {
		return acc.partial(), m.classify(upstream.Stalled(ctx, err), false)
	}
	defer res.Body.Close()
	dec := newSSEReader(res.Body)
	started := false // an event came: a failure from here on cut a turn off
	for dec.next() { // comments are not events here: the reader skips them
		ev := dec.event()
		progress()
		started = true
		data := bytes.TrimSpace(ev.Data)
		switch {
		case len(data) == 0:
			continue
		case bytes.Equal(data, []byte("[DONE]")):
			return acc.response(), nil
		}
		var chunk sdk.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return acc.partial(), streamFailed("a chunk is not JSON: "+err.Error(), true)
		}
		// A server that fails mid-stream sends {"error": {...}} as a chunk
		// (some write "error": null in every chunk: no error).
		if e, isErr := chunk.JSON.ExtraFields["error"]; (isErr && e.Raw() != "null") || ev.Type == "error" {
			// vLLM and LiteLLM refuse a prompt too long this way too.
			retryable := streamErrorRetryable(data)
			e := apiError(0, data)
			e.Truncated, e.TooLong = retryable, e.TooLong && !retryable
			return acc.partial(), &retry.Failure{Err: e, Retryable: retryable}
		}
		acc.add(chunk, emit)
	}
	if err := dec.err; err != nil {
		return acc.partial(), m.classify(upstream.Stalled(ctx, err), started)
	}
	return acc.partial(), streamFailed("the stream ended before data: [DONE]", true)
}

// streamErrorRetryable reads an error a server sent as a chunk: a request
// the server refuses (a prompt too long, a bad tool schema; vLLM and
// LiteLLM send these in a stream that began with 200) fails the same way
// again, while an overload, a rate limit or a server's own failure may
// pass. An error that says neither is tried again.
func streamErrorRetryable(data []byte) bool {
	var v struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &v) != nil {
		return true
	}
	var code int
	if json.Unmarshal(v.Error.Code, &code) != nil {
		var s string
		if json.Unmarshal(v.Error.Code, &s) == nil {
			code, _ = strconv.Atoi(s)
		}
	}
	if code >= 400 {
		return retry.Status(code, nil)
	}
	return retry.ErrorType(v.Error.Type)
}

// statusError is an HTTP answer with an error status, caught by the
// statusErrors middleware before the SDK parses it: local servers shape error
// bodies in more ways than the SDK expects, and its parser drops the status
// when the body surprises it.
type statusError struct {
	status int
	header http.Header
	body   []byte
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d", e.status) }

// statusErrors is the middleware that takes error statuses as statusError
// and bounds every other answer (upstream.Limits.Guard).
func statusErrors(l upstream.Limits) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if err != nil {
			return res, err
		}
		if res, err = l.Guard(res); err != nil || res.StatusCode < 400 {
			return res, err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body) // Guard read it, up to upstream.MaxErrorBody
		return nil, &statusError{status: res.StatusCode, header: res.Header, body: body}
	}
}

// classify turns what ended an attempt into a *model.Error: a request
// that got no stream, or a stream whose reading failed (started).
func (m *Model) classify(err error, started bool) *retry.Failure {
	var se *statusError
	if errors.As(err, &se) {
		f := &retry.Failure{
			Err:       apiError(se.status, se.body),
			Retryable: retry.Status(se.status, se.header),
		}
		f.Wait, f.HasWait = retry.After(se.header, m.now())
		return f
	}
	return retry.Failed(Provider, err, started)
}

// apiError is an error answer's *model.Error: status 0 for one a stream
// carried.
func apiError(status int, body []byte) *model.Error {
	msg := errorMessage(body, status)
	return &model.Error{Provider: Provider, Status: status, Message: upstream.Message(msg), TooLong: upstream.TooLong(status, msg, body)}
}

// errorMessage is the server's explanation in an error body
// (upstream.JSONMessage's shapes), else the status text.
func errorMessage(body []byte, status int) string {
	if m := upstream.JSONMessage(body); m != "" {
		return m
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "unknown error"
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, which may carry credentials.
		return nil, errors.New("it does not parse as a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", shownURL(raw, u))
	}
	return u, nil
}

// shownURL is raw as an error may quote it: as written, or without its
// password when it has one.
func shownURL(raw string, u *url.URL) string {
	if u.User != nil {
		return u.Redacted()
	}
	return raw
}
