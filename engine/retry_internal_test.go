package engine

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRetryPolicyParse: a policy parses with every default filled in, or
// fails with an error that names the field and says what is wanted.
func TestRetryPolicyParse(t *testing.T) {
	defaults := retrySpec{attempts: 1, timeout: 7 * time.Second, backoff: time.Second, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: 10 * (7 * time.Second)}
	tests := []struct {
		name   string
		policy string // JSON; "null" for none
		want   retrySpec
		err    string // in the error; "" for none
	}{
		{"no policy: one attempt, the handler's timeout", `null`, defaults, ""},
		{"empty policy", `{}`, defaults, ""},
		{"attempts 0 means the default, 1", `{"attempts":0}`, defaults, ""},
		{"every field", `{"attempts":3,"timeout":"30s","backoff":"250ms","multiplier":1.5,"maxBackoff":"1m"}`,
			retrySpec{attempts: 3, timeout: 30 * time.Second, backoff: 250 * time.Millisecond, multiplier: 1.5, maxBackoff: time.Minute, maxTimeout: 10 * (30 * time.Second)}, ""},
		{"compound durations", `{"timeout":"1m30s","maxBackoff":"1h"}`,
			retrySpec{attempts: 1, timeout: 90 * time.Second, backoff: time.Second, multiplier: 2, maxBackoff: time.Hour, maxTimeout: 10 * (90 * time.Second)}, ""},
		{"zero backoff retries at once", `{"attempts":2,"backoff":"0s"}`,
			retrySpec{attempts: 2, timeout: 7 * time.Second, backoff: 0, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: 10 * (7 * time.Second)}, ""},
		{"multiplier 1: constant backoff", `{"multiplier":1}`,
			retrySpec{attempts: 1, timeout: 7 * time.Second, backoff: time.Second, multiplier: 1, maxBackoff: 30 * time.Second, maxTimeout: 10 * (7 * time.Second)}, ""},
		{"the most attempts", `{"attempts":100}`,
			retrySpec{attempts: 100, timeout: 7 * time.Second, backoff: time.Second, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: 10 * (7 * time.Second)}, ""},

		{"maxTimeout", `{"timeout":"10s","maxTimeout":"5m"}`,
			retrySpec{attempts: 1, timeout: 10 * time.Second, backoff: time.Second, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: 5 * time.Minute}, ""},
		{"a timeout of centuries: maxTimeout's default saturates", `{"timeout":"300000h"}`,
			retrySpec{attempts: 1, timeout: 300000 * time.Hour, backoff: time.Second, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: math.MaxInt64}, ""},
		{"maxTimeout shorter than timeout", `{"timeout":"10s","maxTimeout":"5s"}`, retrySpec{}, `maxTimeout "5s" is shorter than timeout 10s`},
		{"maxTimeout that is not a duration", `{"maxTimeout":"long"}`, retrySpec{}, `maxTimeout "long" is not a Go duration`},
		{"negative attempts", `{"attempts":-1}`, retrySpec{}, "attempts is -1, want at least 1"},
		{"too many attempts", `{"attempts":101}`, retrySpec{}, "attempts is 101, want at most 100"},
		{"timeout that is not a duration", `{"timeout":"soon"}`, retrySpec{}, `timeout "soon" is not a Go duration such as "30s" or "1m30s"`},
		{"timeout without a unit", `{"timeout":"30"}`, retrySpec{}, `timeout "30" is not a Go duration`},
		{"zero timeout", `{"timeout":"0s"}`, retrySpec{}, `timeout "0s" must be positive`},
		{"negative timeout", `{"timeout":"-5s"}`, retrySpec{}, `timeout "-5s" must be positive`},
		{"backoff that is not a duration", `{"backoff":"1 second"}`, retrySpec{}, `backoff "1 second" is not a Go duration`},
		{"negative backoff", `{"backoff":"-1s"}`, retrySpec{}, `backoff "-1s" must not be negative ("0s": at once)`},
		{"maxBackoff that is not a duration", `{"maxBackoff":"forever"}`, retrySpec{}, `maxBackoff "forever" is not a Go duration`},
		{"negative maxBackoff", `{"maxBackoff":"-1m"}`, retrySpec{}, `maxBackoff "-1m" must not be negative ("0s": at once)`},
		{"multiplier below 1", `{"multiplier":0.5}`, retrySpec{}, "multiplier is 0.5, want at least 1"},
		{"negative multiplier", `{"multiplier":-2}`, retrySpec{}, "multiplier is -2, want at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *RetryPolicy
			if err := json.Unmarshal([]byte(tt.policy), &p); err != nil {
				t.Fatal(err)
			}
			got, err := p.parse(7 * time.Second)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrBadRetry) || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("parse(%s): %v; want ErrBadRetry saying %q", tt.policy, err, tt.err)
				}
				if verr := p.Validate(); verr == nil || verr.Error() != err.Error() {
					t.Errorf("Validate(%s) = %v, want %v", tt.policy, verr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%s): %v", tt.policy, err)
			}
			if got != tt.want {
				t.Errorf("parse(%s) = %+v, want %+v", tt.policy, got, tt.want)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate(%s): %v", tt.policy, err)
			}
		})
	}
	for _, m := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := (&RetryPolicy{Multiplier: m}).parse(time.Second); err == nil || !strings.Contains(err.Error(), "multiplier is not a number") {
			t.Errorf("multiplier %v: %v", m, err)
		}
	}
}

// TestBackoff: the wait before attempt n is exponential, capped, with full
// jitter: a uniform draw from [0, min(backoff × multiplier^(n-2), maxBackoff)).
func TestBackoff(t *testing.T) {
	spec := retrySpec{attempts: 10, timeout: time.Second, backoff: time.Second, multiplier: 2, maxBackoff: 30 * time.Second, maxTimeout: 10 * (time.Second)}
	top := func() float64 { return math.Nextafter(1, 0) } // the largest draw below 1
	tests := []struct {
		name string
		spec retrySpec
		n    int
		rnd  func() float64
		want time.Duration
	}{
		{"attempt 2, top of the range", spec, 2, top, time.Second - 1},
		{"attempt 3 doubles", spec, 3, top, 2*time.Second - 1},
		{"attempt 4", spec, 4, top, 4*time.Second - 1},
		{"attempt 6", spec, 6, top, 16*time.Second - 1},
		{"attempt 7 is capped", spec, 7, top, 30*time.Second - 1},
		{"attempt 10 stays capped", spec, 10, top, 30*time.Second - 1},
		{"half the range", spec, 4, func() float64 { return 0.5 }, 2 * time.Second},
		{"a zero draw retries at once", spec, 5, func() float64 { return 0 }, 0},
		{"multiplier 1 is constant", retrySpec{backoff: 3 * time.Second, multiplier: 1, maxBackoff: time.Minute}, 9, func() float64 { return 0.5 }, 1500 * time.Millisecond},
		{"a cap below the first wait", retrySpec{backoff: 10 * time.Second, multiplier: 2, maxBackoff: time.Second}, 2, func() float64 { return 0.5 }, 500 * time.Millisecond},
		{"zero backoff with a huge multiplier is zero, not NaN", retrySpec{backoff: 0, multiplier: 1e300, maxBackoff: time.Minute}, 100, top, 0},
		{"a huge multiplier overflows to the cap", retrySpec{backoff: time.Second, multiplier: 1e300, maxBackoff: time.Minute}, 100, func() float64 { return 0.5 }, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.backoffBefore(tt.n, tt.rnd); got != tt.want {
				t.Errorf("backoffBefore(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
	// Without Options.Rand, the draw is random, and within the range.
	for range 1000 {
		if got := spec.backoffBefore(3, nil); got < 0 || got >= 2*time.Second {
			t.Fatalf("backoffBefore(3) = %v, want [0, 2s)", got)
		}
	}
}

// TestRetryPolicyClone: the proposed tool.call gets its own copy of the
// declared policy.
func TestRetryPolicyClone(t *testing.T) {
	var nilPolicy *RetryPolicy
	if nilPolicy.clone() != nil {
		t.Error("clone of nil is not nil")
	}
	p := &RetryPolicy{Attempts: 3, Timeout: "1s"}
	c := p.clone()
	c.Attempts = 5
	if p.Attempts != 3 || c.Timeout != "1s" {
		t.Errorf("clone shares its policy: %+v, %+v", p, c)
	}
}
