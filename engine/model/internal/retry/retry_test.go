package retry

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine/model"
)

func TestAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{"retry-after": "3"}, 3 * time.Second, true},
		{map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "bad", "retry-after": "4"}, 4 * time.Second, true},
		{map[string]string{"retry-after": now.Add(time.Minute).Format(http.TimeFormat)}, time.Minute, true},
		{map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"retry-after": "soon"}, 0, false},
		{map[string]string{"retry-after": "-1"}, 0, false},
		{map[string]string{"retry-after": "NaN"}, 0, false},
		// Longer than a Duration holds: the longest, never a negative wait
		// that would retry at once.
		{map[string]string{"retry-after": "1e11"}, math.MaxInt64, true},
		{map[string]string{"retry-after": "Inf"}, math.MaxInt64, true},
		{map[string]string{"retry-after-ms": "1e20"}, math.MaxInt64, true},
		{nil, 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := After(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("After(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
	if got, ok := After(nil, now); got != 0 || ok {
		t.Errorf("After(nil header) = %v, %v; want 0, false", got, ok)
	}
}

func TestBackoffBounded(t *testing.T) {
	for attempt := range 100 {
		d := Backoff(attempt)
		if d < firstBackoff/2 || d > maxBackoff {
			t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", attempt, d, firstBackoff/2, maxBackoff)
		}
	}
}

func TestStatus(t *testing.T) {
	for code, want := range map[int]bool{
		400: false, 401: false, 403: false, 404: false,
		408: true, 409: true, 429: true, 500: true, 502: true, 503: true, 529: true,
	} {
		if got := Status(code, nil); got != want {
			t.Errorf("Status(%d) = %v, want %v", code, got, want)
		}
	}
	// The server's word wins: Anthropic marks a 5xx not worth another try,
	// or a 4xx worth one.
	for _, tt := range []struct {
		code   int
		header string
		want   bool
	}{
		{500, "false", false},
		{400, "true", true},
		{429, "maybe", true},
		{400, "", false},
	} {
		h := http.Header{}
		if tt.header != "" {
			h.Set("x-should-retry", tt.header)
		}
		if got := Status(tt.code, h); got != tt.want {
			t.Errorf("Status(%d, x-should-retry %q) = %v, want %v", tt.code, tt.header, got, tt.want)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
}

// step is one scripted attempt: the text it emits, then its outcome.
type step struct {
	emit []string
	fail *Failure
}

func failure(status int, retryable bool) *Failure {
	return &Failure{Err: &model.Error{Provider: "test", Status: status, Message: "no"}, Retryable: retryable}
}

func asking(wait time.Duration) *Failure {
	f := failure(429, true)
	f.Wait, f.HasWait = wait, true
	return f
}

// script runs the steps in turn, repeating the last one.
func script(steps []step) (attempt func(context.Context, func(string)) (model.Response, *Failure), count func() int) {
	n := 0
	attempt = func(_ context.Context, emit func(string)) (model.Response, *Failure) {
		s := steps[min(n, len(steps)-1)]
		n++
		var resp model.Response
		for _, text := range s.emit {
			emit(text)
			resp.Text += text
		}
		if s.fail != nil {
			resp.StopReason = model.StopError
		}
		return resp, s.fail
	}
	return attempt, func() int { return n }
}

func TestLoop(t *testing.T) {
	ok := step{emit: []string{"fi", "ne"}}
	unavailable, unauthorized, cut := failure(503, true), failure(401, false), failure(0, true)
	later, never, slow := asking(7*time.Second), asking(time.Hour), asking(40*time.Second)
	tests := []struct {
		name     string
		steps    []step
		policy   Policy
		stream   bool
		attempts int
		waits    []time.Duration // nil: any backoff, one per retry
		deltas   []string
		err      *model.Error // the last failure's, returned as it is; nil: success
	}{
		{name: "success streams", steps: []step{ok}, stream: true, attempts: 1, deltas: []string{"fi", "ne"}},
		{name: "success without stream calls onDelta once", steps: []step{ok}, attempts: 1, deltas: []string{"fine"}},
		{name: "retryable then success", steps: []step{{fail: unavailable}, ok}, stream: true, attempts: 2, deltas: []string{"fi", "ne"}},
		{name: "retry-after is waited for", steps: []step{{fail: later}, ok}, stream: true, attempts: 2, waits: []time.Duration{7 * time.Second}, deltas: []string{"fi", "ne"}},
		{name: "retry-after beyond MaxWait gives up", steps: []step{{fail: never}, ok}, stream: true, attempts: 1, waits: []time.Duration{}, err: never.Err},
		{name: "MaxWait raised", steps: []step{{fail: never}, ok}, policy: Policy{MaxWait: 2 * time.Hour}, attempts: 2, waits: []time.Duration{time.Hour}, deltas: []string{"fine"}},
		{name: "not retryable", steps: []step{{fail: unauthorized}, ok}, stream: true, attempts: 1, err: unauthorized.Err},
		{name: "default bound", steps: []step{{fail: unavailable}}, stream: true, attempts: DefaultMaxRetries + 1, err: unavailable.Err},
		{name: "MaxRetries bound", steps: []step{{fail: unavailable}}, policy: Policy{MaxRetries: 1}, stream: true, attempts: 2, err: unavailable.Err},
		{name: "negative MaxRetries: none", steps: []step{{fail: unavailable}, ok}, policy: Policy{MaxRetries: -1}, stream: true, attempts: 1, err: unavailable.Err},
		{name: "text shown: no retry", steps: []step{{emit: []string{"half"}, fail: cut}, ok}, stream: true, attempts: 1, deltas: []string{"half"}, err: cut.Err},
		{name: "text not streamed: retried", steps: []step{{emit: []string{"half"}, fail: cut}, ok}, attempts: 2, deltas: []string{"fine"}},
		// The person waits through every wait of the turn, with no word.
		{name: "the turn's waits together beyond MaxWait give up", steps: []step{{fail: slow}}, stream: true, attempts: 2, waits: []time.Duration{40 * time.Second}, err: slow.Err},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var waits []time.Duration
			p := tt.policy
			p.Provider = "test"
			p.Sleep = func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			}
			var deltas []string
			var heard []model.Retry
			req := model.Request{Stream: tt.stream, OnRetry: func(r model.Retry) { heard = append(heard, r) }}
			attempt, attempts := script(tt.steps)
			resp, err := Loop(context.Background(), p, req, func(s string) { deltas = append(deltas, s) }, attempt)
			if got := attempts(); got != tt.attempts {
				t.Errorf("attempts = %d, want %d", got, tt.attempts)
			}
			// The request hears of each retry, before its wait: the page
			// says why the turn is quiet.
			most := p.withDefaults().MaxRetries + 1
			if len(heard) != tt.attempts-1 {
				t.Errorf("OnRetry heard %d retries, want %d", len(heard), tt.attempts-1)
			}
			for i, r := range heard {
				if r.Provider != "test" || r.Attempt != i+1 || r.Attempts != most || i >= len(waits) || r.Wait != waits[i] || r.Err == nil {
					t.Errorf("retry %d heard as %+v, want the provider's, attempt %d of %d, the wait slept (%v), its error", i, r, i+1, most, waits)
				}
			}
			if tt.waits == nil {
				if len(waits) != tt.attempts-1 {
					t.Errorf("waits = %v, want one per retry (%d)", waits, tt.attempts-1)
				}
			} else if !slices.Equal(waits, tt.waits) {
				t.Errorf("waits = %v, want %v", waits, tt.waits)
			}
			if !reflect.DeepEqual(deltas, tt.deltas) {
				t.Errorf("deltas = %q, want %q", deltas, tt.deltas)
			}
			if tt.err == nil {
				if err != nil || resp.Text != "fine" {
					t.Errorf("Loop = %+v, %v; want the successful attempt's text", resp, err)
				}
				return
			}
			var me *model.Error
			if !errors.As(err, &me) || me != tt.err {
				t.Errorf("error = %v (%T), want the failure's own %v", err, err, tt.err)
			}
			if resp.StopReason != model.StopError {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, model.StopError)
			}
		})
	}
}

// A failed turn: the usage of every attempt (each was billed), no text
// when the user saw none, and each retry told to the log.
func TestLoopFailedTurn(t *testing.T) {
	var log strings.Builder
	n, retries := 0, 0
	p := Policy{Provider: "test", MaxRetries: 2, Sleep: func(context.Context, time.Duration) error { return nil },
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	req := model.Request{OnRetry: func(model.Retry) { retries++ }}
	resp, err := Loop(context.Background(), p, req, nil, func(ctx context.Context, emit func(string)) (model.Response, *Failure) {
		n++
		emit("half a sent")
		return model.Response{Text: "half a sent", StopReason: model.StopError, Usage: model.Usage{InputTokens: 100, OutputTokens: n}}, failure(0, true)
	})
	if err == nil || resp.Text != "" {
		t.Errorf("Loop = %+v, %v; want an error and no text: none was shown", resp, err)
	}
	if resp.Usage != (model.Usage{InputTokens: 300, OutputTokens: 6}) {
		t.Errorf("usage %+v, want the three attempts' together", resp.Usage)
	}
	if got := strings.Count(log.String(), "model request failed, trying again"); got != 2 || retries != 2 {
		t.Errorf("%d retries logged, %d counted, want 2:\n%s", got, retries, log.String())
	}
}

func TestLoopDefaultSleep(t *testing.T) {
	// A nil Sleep is the real timer; the retry-after keeps the test fast.
	attempt, attempts := script([]step{{fail: asking(time.Millisecond)}, {emit: []string{"fine"}}})
	resp, err := Loop(context.Background(), Policy{Provider: "test"}, model.Request{Stream: true}, nil, attempt)
	if err != nil || resp.Text != "fine" || attempts() != 2 {
		t.Errorf("Loop = %+v, %v after %d attempts; want a retry then fine", resp, err, attempts())
	}
}

func TestLoopCancelled(t *testing.T) {
	t.Run("during an attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := Loop(ctx, Policy{Provider: "test"}, model.Request{Stream: true}, nil, func(ctx context.Context, emit func(string)) (model.Response, *Failure) {
			emit("partial")
			cancel()
			return model.Response{Text: "partial", StopReason: model.StopError}, failure(0, true)
		})
		if !errors.Is(err, context.Canceled) || err.Error() != "test: context canceled" {
			t.Errorf("error = %v, want test: context canceled", err)
		}
		if resp.Text != "partial" || resp.StopReason != model.StopCancelled {
			t.Errorf("response = %+v, want the partial text, stop reason cancelled", resp)
		}
	})
	t.Run("while waiting to retry", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p := Policy{Provider: "test", Sleep: func(context.Context, time.Duration) error {
			cancel()
			return ctx.Err()
		}}
		attempt, attempts := script([]step{{fail: failure(503, true)}})
		resp, err := Loop(ctx, p, model.Request{Stream: true}, nil, attempt)
		if !errors.Is(err, context.Canceled) || err.Error() != "test: waiting to retry: context canceled" {
			t.Errorf("error = %v, want test: waiting to retry: context canceled", err)
		}
		if resp.StopReason != model.StopCancelled || attempts() != 1 {
			t.Errorf("response = %+v after %d attempts, want stop reason cancelled after 1", resp, attempts())
		}
	})
}
