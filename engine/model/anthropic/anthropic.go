package anthropic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/retry"
	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// Provider names this package in a *model.Error.
const Provider = "anthropic"

// Defaults of Options.
const (
	DefaultBaseURL   = "https://api.anthropic.com"
	DefaultMaxTokens = 4096
)

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
	// APIKey authenticates every request. It is handed to the SDK and never
	// logged or copied into an error. Empty sends no key, which only a proxy
	// that adds its own will accept.
	APIKey string
	// BaseURL is the API's root; default DefaultBaseURL. The key is sent to it,
	// so point it only at a server you trust (a proxy, a test server).
	BaseURL string
	// HTTPClient sends the requests; default upstream.HTTPClient. Do not
	// give it a Client.Timeout: that bounds the whole stream and would cut
	// long turns off; StreamIdleTimeout (from the request on, headers
	// included) and MaxResponseBytes bound it, whatever the client.
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
	// MaxTokens is sent when Request.MaxTokens is zero, since the API requires
	// a bound; default DefaultMaxTokens.
	MaxTokens int
	// Sleep waits between attempts; default a timer that gives up when ctx is
	// done. Tests inject one that records the wait and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now turns a retry-after given as an HTTP date into a wait; default
	// time.Now.
	Now func() time.Time
	// StreamIdleTimeout cuts a turn off whose stream sends no event (the
	// API's pings do not count) for this long, from the request on;
	// default upstream.DefaultIdle (10 min).
	StreamIdleTimeout time.Duration
	// MaxResponseBytes cuts an answer off past this many bytes; default
	// upstream.DefaultMaxBytes (64 MiB).
	MaxResponseBytes int64
	// Clock times StreamIdleTimeout; default the system's.
	Clock clock.Clock
	// Logger hears of each retry; nil: none.
	Logger *slog.Logger
}

// Model is Claude behind the Messages API. Build it with New.
type Model struct {
	client    sdk.Client
	retry     retry.Policy
	maxTokens int
	now       func() time.Time
	limits    upstream.Limits
}

var _ model.Model = (*Model)(nil)

// New builds a Model. It fails only on a BaseURL that is not an http(s) URL,
// so a typo is caught at startup rather than at the first turn.
func New(opts Options) (*Model, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if err := checkURL(base); err != nil {
		return nil, fmt.Errorf("anthropic: bad base URL: %w", err)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = upstream.HTTPClient()
	}
	limits := upstream.Limits{Idle: opts.StreamIdleTimeout, MaxBytes: opts.MaxResponseBytes, Clock: opts.Clock}
	reqOpts := []option.RequestOption{
		// The environment is the providers package's business: a library that
		// reads ANTHROPIC_* behind its caller's back makes configuration
		// impossible to reason about.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		// Retries are ours: the SDK's sleep cannot be injected, and it cannot
		// know whether text has already reached the user.
		option.WithMaxRetries(0),
		option.WithMiddleware(guard(limits)),
	}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(opts.APIKey))
	}
	m := &Model{
		client: sdk.NewClient(reqOpts...),
		retry: retry.Policy{
			Provider:   Provider,
			MaxRetries: opts.MaxRetries,
			MaxWait:    opts.MaxRetryWait,
			Sleep:      opts.Sleep,
			Logger:     opts.Logger,
			Secret:     opts.APIKey,
		},
		maxTokens: opts.MaxTokens,
		now:       opts.Now,
		limits:    limits,
	}
	if m.maxTokens <= 0 {
		m.maxTokens = DefaultMaxTokens
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// Generate streams one assistant turn. Retryable failures (429, 529, 5xx, a
// connection that fails or an overloaded stream) are retried only while no
// text has reached onDelta, so the user never sees a sentence twice.
func (m *Model) Generate(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	params := m.params(req)
	return retry.Loop(ctx, m.retry, req, onDelta, func(ctx context.Context, emit func(string)) (model.Response, *retry.Failure) {
		return m.attempt(ctx, params, emit)
	})
}

// guard bounds each answer (upstream.Limits.Guard): the SDK reads an
// error status's body whole, and a stream for as long as it lasts.
func guard(l upstream.Limits) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if err != nil {
			return res, err
		}
		return l.Guard(res)
	}
}

// attempt sends the request once and reads its stream to message_stop.
func (m *Model) attempt(ctx context.Context, params sdk.MessageNewParams, emit func(string)) (model.Response, *retry.Failure) {
	ctx, progress, stop := m.limits.Watch(ctx)
	defer stop()
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var acc accumulator
	for stream.Next() { // pings are not events here: the SDK skips them
		progress()
		acc.add(stream.Current(), emit)
		if acc.stopped {
			// The turn is whole: what the connection does next (stays
			// open, is reset) is not the turn's.
			return acc.response(), nil
		}
	}
	return acc.partial(), m.classify(upstream.Stalled(ctx, stream.Err()), &acc)
}

// classify turns what ended an attempt early into a *model.Error.
func (m *Model) classify(err error, acc *accumulator) *retry.Failure {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode >= 400:
		// The API answered with an error status before any event.
		f := &retry.Failure{
			Err: &model.Error{
				Provider: Provider,
				Status:   apiErr.StatusCode,
				Message:  apiMessage(apiErr),
				TooLong:  upstream.TooLong(apiErr.StatusCode, apiErr.Message, nil),
				Err:      err,
			},
		}
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
			f.Wait, f.HasWait = retry.After(header, m.now())
		}
		f.Retryable = retry.Status(apiErr.StatusCode, header)
		return f
	case errors.As(err, &apiErr):
		// An SSE error event: the API gave up mid-turn, or refused the
		// request (a prompt too long), which is not a stream cut off.
		retryable := retry.ErrorType(string(apiErr.Type()))
		return &retry.Failure{
			Err:       &model.Error{Provider: Provider, Message: apiMessage(apiErr), Truncated: retryable, TooLong: !retryable && upstream.TooLong(0, apiErr.Message, nil), Err: err},
			Retryable: retryable,
		}
	case err == nil:
		return &retry.Failure{
			Err:       &model.Error{Provider: Provider, Message: "the stream ended before message_stop", Truncated: true},
			Retryable: true,
		}
	default:
		return retry.Failed(Provider, err, acc.started)
	}
}

// apiMessage is the API's own explanation, or the error type or status text
// when the body had none (a proxy's HTML page, say), cut to
// upstream.MaxMessage. Headers never go in.
func apiMessage(e *sdk.Error) string {
	switch {
	case e.Message != "":
		return upstream.Message(e.Message)
	case e.Type() != "":
		return upstream.Message(string(e.Type()))
	case e.StatusCode >= 400 && http.StatusText(e.StatusCode) != "":
		return http.StatusText(e.StatusCode)
	case e.StatusCode < 400:
		return "an error event without a message"
	default:
		return "unknown error"
	}
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, which may carry credentials.
		return errors.New("it does not parse as a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", shownURL(raw, u))
	}
	return nil
}

// shownURL is raw as an error may quote it: as written, or without its
// password when it has one.
func shownURL(raw string, u *url.URL) string {
	if u.User != nil {
		return u.Redacted()
	}
	return raw
}
