package retry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// Retry defaults. They are small because a person is waiting for the turn:
// a few quick retries absorb a transient overload, a long outage should be
// reported, not hidden behind minutes of silence.
const (
	DefaultMaxRetries = 3
	DefaultMaxWait    = time.Minute
	firstBackoff      = 500 * time.Millisecond
	maxBackoff        = 8 * time.Second
)

// After reads how long the server asked us to wait: retry-after-ms
// (milliseconds, sent by Anthropic and OpenAI), else retry-after in seconds or
// as an HTTP date, measured from now. ok is false when neither header says
// anything usable.
func After(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return duration(ms, time.Millisecond), true
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return duration(s, time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// duration is n units, or the longest Duration when that is more (a
// server that asks for a wait of centuries, or of +Inf, is asking for
// longer than MaxWait, not for none).
func duration(n float64, unit time.Duration) time.Duration {
	if d := n * float64(unit); d < math.MaxInt64 {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// Backoff is the wait before retry number attempt+1 when the server gave no
// retry-after: exponential, capped, with half of it jittered so that many
// sessions hitting the same overload do not come back in lockstep.
func Backoff(attempt int) time.Duration {
	d := maxBackoff
	if attempt < 5 {
		d = min(maxBackoff, firstBackoff<<attempt)
	}
	return d/2 + rand.N(d/2+1)
}

// Sleep waits for d, or returns ctx.Err() as soon as ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Status reports whether an HTTP status is worth another attempt: a
// request timeout, a conflict, rate limits, overload (Anthropic's 529,
// which some proxies also send) and server errors, as the APIs' own SDKs
// retry; the server's x-should-retry (true or false), when h has one, says
// otherwise.
func Status(code int, h http.Header) bool {
	switch h.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
}

// ErrorType reports whether an error an API streams, by its type, is worth
// another attempt: a request the API refuses (a prompt too long, a bad
// tool schema, a key it does not take) fails the same way again; an
// overload, a rate limit, the server's own failure, or a type not known
// here, may pass.
func ErrorType(kind string) bool {
	switch kind {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large", "billing_error":
		return false
	default:
		return true
	}
}

// Failed is an attempt that got no answer, or whose answer was cut off
// (started: an event came) by what its reading returned. A connection
// that failed (refused, reset, timed out, a failed DNS lookup) is worth
// another attempt; a server that sent nothing for its turn's Watch
// (upstream.ErrStalled), and an answer the upstream package refused or a
// line longer than the SDK's decoder reads, are not: the same server
// would keep the user waiting as long again, or answer the same.
func Failed(provider string, err error, started bool) *Failure {
	if errors.Is(err, bufio.ErrTooLong) {
		err = fmt.Errorf("%w: a line longer than the stream's reader takes (%w)", upstream.ErrTooLarge, err)
	}
	retryable := !errors.Is(err, upstream.ErrStalled) && !errors.Is(err, upstream.ErrTooLarge) && !errors.Is(err, upstream.ErrNotEventStream)
	if started {
		return &Failure{Err: &model.Error{Provider: provider, Message: upstream.Message(err.Error()), Truncated: true, Err: err}, Retryable: retryable}
	}
	return &Failure{Err: &model.Error{Provider: provider, Message: upstream.Message("request failed: " + err.Error()), Err: err}, Retryable: retryable}
}

// Failure is one failed attempt and what it says about the next one.
type Failure struct {
	Err       *model.Error
	Retryable bool
	Wait      time.Duration // the server's retry-after, when HasWait
	HasWait   bool
}

// Policy bounds Loop's retries. The zero value of every field but Provider
// means its default, as in the providers' Options.
type Policy struct {
	// Provider prefixes the errors Loop makes itself ("anthropic: ...").
	Provider string
	// MaxRetries bounds the retries after the first attempt; zero means
	// DefaultMaxRetries, negative means none.
	MaxRetries int
	// MaxWait bounds the waits of one turn together; when the next wait
	// (the server's retry-after, or the backoff) would pass it, the error
	// is returned at once. Zero or less means DefaultMaxWait.
	MaxWait time.Duration
	// Sleep waits between attempts; nil means the package's Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger hears of each retry (INFO): an operator sees rate limits
	// and overloads being absorbed. Nil: none.
	Logger *slog.Logger
	// Secret is the API key, which a failure's message never carries
	// (upstream.Redact): it goes to pages, workers and the log.
	Secret string
}

// Loop runs attempt until it succeeds or its failure is not worth another
// try: not retryable, out of retries, asking for a wait that would take the
// turn's waits together beyond MaxWait (a person waits, with no word, for
// each), or after text has reached onDelta, so the user never sees a
// sentence twice.
//
// attempt passes the turn's text to emit as it arrives. When req.Stream is
// set, emit forwards it to onDelta (which may be nil); otherwise onDelta
// gets the whole text of the successful attempt once, at the end.
// req.OnRetry, when set, hears of each retry before its wait. A failed turn
// returns the last attempt's response (without its text when none was
// shown) and its Failure.Err; a turn cut short by ctx returns
// model.StopCancelled and ctx's error, prefixed with the provider. The
// usage returned counts every attempt's: failed attempts are billed too.
func Loop(ctx context.Context, p Policy, req model.Request, onDelta func(string), attempt func(ctx context.Context, emit func(string)) (model.Response, *Failure)) (model.Response, error) {
	p = p.withDefaults()
	shown := false
	emit := func(text string) {
		if text == "" || !req.Stream {
			return
		}
		shown = true
		if onDelta != nil {
			onDelta(text)
		}
	}
	var spent model.Usage // the failed attempts'
	var waited time.Duration
	for n := 0; ; n++ {
		resp, fail := attempt(ctx, emit)
		resp.Usage = add(resp.Usage, spent)
		if fail == nil {
			if !req.Stream && resp.Text != "" && onDelta != nil {
				onDelta(resp.Text)
			}
			return resp, nil
		}
		fail.Err.Message = upstream.Redact(fail.Err.Message, p.Secret)
		if !shown {
			resp.Text = "" // the user saw none of it: the turn has no text
		}
		if err := ctx.Err(); err != nil {
			resp.StopReason = model.StopCancelled
			return resp, fmt.Errorf("%s: %w", p.Provider, err)
		}
		if shown || !fail.Retryable || n >= p.MaxRetries {
			return resp, fail.Err
		}
		wait := Backoff(n)
		if fail.HasWait {
			wait = fail.Wait
		}
		if wait > p.MaxWait-waited {
			return resp, fail.Err
		}
		waited += wait
		spent = resp.Usage
		if p.Logger != nil {
			p.Logger.Info("model request failed, trying again", "provider", p.Provider, "attempt", n+1, "wait", wait, "err", fail.Err)
		}
		if req.OnRetry != nil {
			req.OnRetry(model.Retry{Provider: p.Provider, Attempt: n + 1, Attempts: p.MaxRetries + 1, Wait: wait, Err: fail.Err})
		}
		if err := p.Sleep(ctx, wait); err != nil {
			resp.StopReason = model.StopCancelled
			return resp, fmt.Errorf("%s: waiting to retry: %w", p.Provider, err)
		}
	}
}

// add sums two usages, each bounded first (model.Usage.Bounded), so that
// a server's absurd count cannot wrap the sum.
func add(a, b model.Usage) model.Usage {
	a, b = a.Bounded(), b.Bounded()
	return model.Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens}
}

func (p Policy) withDefaults() Policy {
	switch {
	case p.MaxRetries == 0:
		p.MaxRetries = DefaultMaxRetries
	case p.MaxRetries < 0:
		p.MaxRetries = 0
	}
	if p.MaxWait <= 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.Sleep == nil {
		p.Sleep = Sleep
	}
	return p
}
