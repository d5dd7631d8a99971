package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds a call's attempts. Zero fields take their defaults.
type RetryPolicy struct {
	// Attempts is the total number of attempts, the first included; default 1.
	Attempts int `json:"attempts,omitempty"`
	// Timeout is each attempt's limit as a Go duration; default per handler
	// (Options.ClientTimeout, Options.WorkerTimeout).
	Timeout string `json:"timeout,omitempty"`
	// Backoff is the wait before attempt 2; default "1s".
	Backoff string `json:"backoff,omitempty"`
	// Multiplier is the wait's growth per attempt; default 2.
	Multiplier float64 `json:"multiplier,omitempty"`
	// MaxBackoff caps the wait; default "30s".
	MaxBackoff string `json:"maxBackoff,omitempty"`
	// MaxTimeout caps one attempt however often it reports progress: each
	// tool.progress moves the attempt's deadline to Timeout from then,
	// never past MaxTimeout from the attempt's start. Default: 10 times
	// Timeout; at least Timeout.
	MaxTimeout string `json:"maxTimeout,omitempty"`
}

// Defaults of RetryPolicy.
const (
	DefaultClientTimeout = 30 * time.Second
	DefaultWorkerTimeout = 5 * time.Minute
	// DefaultDecideTimeout is Options.DecideTimeout's default: how long a
	// session waits for its worker's answer to a trigger but tool.execute.
	DefaultDecideTimeout = time.Minute
	DefaultBackoff       = time.Second
	DefaultMultiplier    = 2.0
	DefaultMaxBackoff    = 30 * time.Second
	// MaxAttempts bounds Attempts, so a typo cannot retry for days.
	MaxAttempts = 100
	// progressCap is MaxTimeout's default, in Timeouts.
	progressCap = 10
)

// retrySpec is a parsed RetryPolicy with every default filled in.
type retrySpec struct {
	attempts   int
	timeout    time.Duration
	backoff    time.Duration
	multiplier float64
	maxBackoff time.Duration
	maxTimeout time.Duration
}

// capOf is MaxTimeout's default for timeout: progressCap of it, or the
// longest duration there is when that overflows (a timeout of centuries
// made it negative, and the policy was refused for a maxTimeout it never
// gave).
func capOf(timeout time.Duration) time.Duration {
	if timeout > math.MaxInt64/progressCap {
		return math.MaxInt64
	}
	return progressCap * timeout
}

// ErrBadRetry: a retry policy does not parse.
var ErrBadRetry = errors.New("bad retry policy")

// parse checks p and fills in defaults; timeout is the handler's default.
func (p *RetryPolicy) parse(defaultTimeout time.Duration) (retrySpec, error) {
	s := retrySpec{
		attempts:   1,
		timeout:    defaultTimeout,
		backoff:    DefaultBackoff,
		multiplier: DefaultMultiplier,
		maxBackoff: DefaultMaxBackoff,
	}
	if p == nil {
		s.maxTimeout = capOf(s.timeout)
		return s, nil
	}
	switch {
	case p.Attempts < 0:
		return s, fmt.Errorf("%w: attempts is %d, want at least 1", ErrBadRetry, p.Attempts)
	case p.Attempts > MaxAttempts:
		return s, fmt.Errorf("%w: attempts is %d, want at most %d", ErrBadRetry, p.Attempts, MaxAttempts)
	case p.Attempts > 0:
		s.attempts = p.Attempts
	}
	var err error
	if s.timeout, err = parseDuration("timeout", p.Timeout, s.timeout, false); err != nil {
		return s, err
	}
	if s.backoff, err = parseDuration("backoff", p.Backoff, s.backoff, true); err != nil {
		return s, err
	}
	if s.maxBackoff, err = parseDuration("maxBackoff", p.MaxBackoff, s.maxBackoff, true); err != nil {
		return s, err
	}
	if s.maxTimeout, err = parseDuration("maxTimeout", p.MaxTimeout, capOf(s.timeout), false); err != nil {
		return s, err
	}
	if s.maxTimeout < s.timeout {
		return s, fmt.Errorf("%w: maxTimeout %q is shorter than timeout %s", ErrBadRetry, p.MaxTimeout, s.timeout)
	}
	switch {
	case math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0):
		return s, fmt.Errorf("%w: multiplier is not a number", ErrBadRetry)
	case p.Multiplier != 0 && p.Multiplier < 1:
		return s, fmt.Errorf("%w: multiplier is %g, want at least 1", ErrBadRetry, p.Multiplier)
	case p.Multiplier != 0:
		s.multiplier = p.Multiplier
	}
	return s, nil
}

// clone returns a copy of p, nil for nil.
func (p *RetryPolicy) clone() *RetryPolicy {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Validate reports whether p parses, naming the field that does not.
func (p *RetryPolicy) Validate() error {
	_, err := p.parse(DefaultClientTimeout)
	return err
}

func parseDuration(field, text string, def time.Duration, zeroOK bool) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a Go duration such as \"30s\" or \"1m30s\"", ErrBadRetry, field, text)
	}
	switch {
	case d < 0 && zeroOK:
		return 0, fmt.Errorf("%w: %s %q must not be negative (\"0s\": at once)", ErrBadRetry, field, text)
	case d <= 0 && !zeroOK:
		return 0, fmt.Errorf("%w: %s %q must be positive", ErrBadRetry, field, text)
	}
	return d, nil
}

// backoffBefore is the wait before attempt n (n >= 2): exponential, capped,
// with full jitter, so retries of many calls spread out instead of marching
// in step. rnd returns a float in [0,1).
func (s retrySpec) backoffBefore(n int, rnd func() float64) time.Duration {
	if s.backoff <= 0 || s.maxBackoff <= 0 {
		return 0 // and 0 × an overflowed power would be NaN
	}
	ceiling := float64(s.backoff) * math.Pow(s.multiplier, float64(n-2))
	if ceiling > float64(s.maxBackoff) {
		ceiling = float64(s.maxBackoff)
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return time.Duration(rnd() * ceiling)
}
