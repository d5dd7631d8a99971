package openai

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Retry defaults. They are small because a person is waiting for the turn:
// a few quick retries absorb a transient overload, a long outage should be
// reported, not hidden behind minutes of silence.
const (
	DefaultMaxRetries   = 3
	DefaultMaxRetryWait = time.Minute
	firstBackoff        = 500 * time.Millisecond
	maxBackoff          = 8 * time.Second
)

// retryAfter reads how long the server asked us to wait: retry-after-ms
// (milliseconds, sent by Anthropic and OpenAI), else retry-after in seconds or
// as an HTTP date. ok is false when neither header says anything usable.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// backoff is the wait before retry number attempt+1 when the server gave no
// retry-after: exponential, capped, with half of it jittered so that many
// sessions hitting the same overload do not come back in lockstep.
func backoff(attempt int) time.Duration {
	d := maxBackoff
	if attempt < 5 {
		d = min(maxBackoff, firstBackoff<<attempt)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryableStatus reports whether an HTTP status is worth another attempt:
// rate limits, overload (some proxies answer 529) and server errors.
func retryableStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}
