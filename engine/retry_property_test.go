package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestRetryProperty: under random interleavings of answers (results,
// retryable and terminal errors), duplicates, stale and late answers, and
// timeouts, on worker and client calls alike, every call settles exactly
// once, never runs more attempts than its policy allows, times out only at
// its deadline, and the model sees exactly one outcome per call: the one the
// engine accepted.
func TestRetryProperty(t *testing.T) {
	rapid.Check(t, checkRetryProperty)
}

// propCall is the test's model of one call, kept from the session's events.
type propCall struct {
	id      string
	handler engine.Handler
	policy  engine.RetryPolicy
	timeout time.Duration
	backoff time.Duration // policy.Backoff parsed
	maxWait time.Duration // policy.MaxBackoff parsed

	started      int       // attempts started
	live         int       // the running attempt; 0 in a backoff or once settled
	deadline     time.Time // of the running attempt
	backingOff   bool
	backoffUntil time.Time
	settled      bool
	answeredBy   int // the attempt of the last accepted answer
	finished     frame
	last         engine.Action // the last browser answer, for a duplicate
}

type attemptKey struct {
	id      string
	attempt int
}

func checkRetryProperty(t *rapid.T) {
	jitter := rapid.Float64Range(0, 0.999).Draw(t, "jitter")
	n := rapid.IntRange(1, 4).Draw(t, "calls")
	calls := make([]*propCall, n)
	byID := map[string]*propCall{}
	var tools []engine.AgentTool
	var uses []model.ToolUse
	for i := range calls {
		c := &propCall{id: fmt.Sprintf("c%d", i)}
		c.handler = rapid.SampledFrom([]engine.Handler{engine.HandlerWorker, engine.HandlerClient}).Draw(t, "handler")
		c.policy = engine.RetryPolicy{
			Attempts:   rapid.IntRange(1, 4).Draw(t, "attempts"),
			Timeout:    rapid.SampledFrom([]string{"1s", "5s", "30s"}).Draw(t, "timeout"),
			Backoff:    rapid.SampledFrom([]string{"0s", "1s", "2s"}).Draw(t, "backoff"),
			Multiplier: rapid.SampledFrom([]float64{1, 2, 3}).Draw(t, "multiplier"),
			MaxBackoff: rapid.SampledFrom([]string{"3s", "30s"}).Draw(t, "maxBackoff"),
		}
		c.timeout, _ = time.ParseDuration(c.policy.Timeout)
		c.backoff, _ = time.ParseDuration(c.policy.Backoff)
		c.maxWait, _ = time.ParseDuration(c.policy.MaxBackoff)
		policy := c.policy
		tools = append(tools, engine.AgentTool{Name: "tool_" + c.id, Handler: c.handler, Retry: &policy})
		uses = append(uses, use(c.id, "tool_"+c.id, `{}`))
		calls[i] = c
		byID[c.id] = c
	}

	// The worker runs each attempt until the test answers it; an attempt
	// whose context ends answers anyway, late.
	var mu sync.Mutex
	answers := map[attemptKey]chan engine.Decision{}
	executed := map[attemptKey]int{}
	answerChan := func(k attemptKey) chan engine.Decision {
		mu.Lock()
		defer mu.Unlock()
		if answers[k] == nil {
			answers[k] = make(chan engine.Decision, 1)
		}
		return answers[k]
	}
	w := &testWorker{agent: engine.AgentConfig{Tools: tools}}
	w.execute = func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		k := attemptKey{ex.ID, ex.Attempt}
		mu.Lock()
		executed[k]++
		mu.Unlock()
		select {
		case d := <-answerChan(k):
			return d, nil
		case <-ctx.Done():
			return engine.Decision{Actions: []engine.Action{
				engine.ToolResult{Result: json.RawMessage(fmt.Sprintf(`"late-%s-%d"`, ex.ID, ex.Attempt))},
				engine.ClientEvent{Name: "late"},
			}}, nil
		}
	}
	b := newBrowser()
	h := setup(t, w, callsThenSummary(uses...), engine.Options{Rand: func() float64 { return jitter }}, b)
	now := func() time.Time { return h.clock.Now() }

	// observe updates the model from one event and checks it against it.
	observe := func(f frame) {
		c := byID[f.ID]
		if c == nil {
			return
		}
		switch f.Type {
		case engine.EventToolStarted:
			switch {
			case c.settled:
				t.Fatalf("%s: attempt %d started after the call settled", c.id, f.Attempt)
			case c.live != 0:
				t.Fatalf("%s: attempt %d started while attempt %d runs", c.id, f.Attempt, c.live)
			case f.Attempt != c.started+1:
				t.Fatalf("%s: attempt %d started after attempt %d", c.id, f.Attempt, c.started)
			case f.Attempt > c.policy.Attempts || f.Attempts != c.policy.Attempts:
				t.Fatalf("%s: attempt %d of %d started; the policy allows %d", c.id, f.Attempt, f.Attempts, c.policy.Attempts)
			}
			// The deadline is written to the millisecond; the timer is exact.
			deadline := now().Add(c.timeout)
			if _, err := time.Parse(time.RFC3339, f.Deadline); err != nil || f.Deadline != deadline.Format("2006-01-02T15:04:05.000Z07:00") {
				t.Fatalf("%s: attempt %d deadline %q (%v), want now+%s = %s", c.id, f.Attempt, f.Deadline, err, c.timeout, deadline)
			}
			c.started, c.live, c.deadline, c.backingOff = f.Attempt, f.Attempt, deadline, false
		case engine.EventToolRetrying:
			if c.settled || c.live != f.Attempt {
				t.Fatalf("%s: tool.retrying for attempt %d; running %d, settled %v", c.id, f.Attempt, c.live, c.settled)
			}
			if f.Code == string(engine.CodeTimeout) && now().Before(c.deadline) {
				t.Fatalf("%s: attempt %d timed out at %s, before its deadline %s", c.id, f.Attempt, now(), c.deadline)
			}
			// Exponential, capped, full jitter; the event shows it to the millisecond.
			ceiling := math.Min(float64(c.backoff)*math.Pow(c.policy.Multiplier, float64(f.Attempt-1)), float64(c.maxWait))
			wait := time.Duration(jitter * ceiling)
			if f.Backoff != wait.Round(time.Millisecond).String() {
				t.Fatalf("%s: backoff %q after attempt %d, want %v", c.id, f.Backoff, f.Attempt, wait)
			}
			c.live, c.backingOff, c.backoffUntil = 0, true, now().Add(wait)
		case engine.EventToolFinished:
			if c.settled {
				t.Fatalf("%s settled twice: %s and %s", c.id, c.finished.Raw, f.Raw)
			}
			if strings.Contains(f.Error, "timed out") {
				if c.live != c.policy.Attempts || now().Before(c.deadline) {
					t.Fatalf("%s: timed out on attempt %d of %d at %s (deadline %s)", c.id, c.live, c.policy.Attempts, now(), c.deadline)
				}
				want := fmt.Sprintf("tool_%s timed out: %d attempt", c.id, c.policy.Attempts)
				if f.Code != string(engine.CodeTimeout) || !strings.HasPrefix(f.Error, want) {
					t.Fatalf("%s: timeout %s", c.id, f.Raw)
				}
			}
			c.settled, c.live, c.backingOff, c.finished = true, 0, false, f
		}
	}
	// sync handles what is buffered; after a barrier that is everything.
	sync := func() {
		h.transcript()
		for _, f := range h.drainBuffered() {
			observe(f)
		}
		for _, c := range calls {
			if c.live != 0 && !c.deadline.After(now()) {
				t.Fatalf("%s: attempt %d still runs at %s, past its deadline %s", c.id, c.live, now(), c.deadline)
			}
		}
	}
	// nextTimer is the earliest deadline or end of a backoff.
	nextTimer := func() (time.Time, bool) {
		var next time.Time
		found := false
		for _, c := range calls {
			var at time.Time
			switch {
			case c.live != 0:
				at = c.deadline
			case c.backingOff:
				at = c.backoffUntil
			default:
				continue
			}
			if !found || at.Before(next) {
				next, found = at, true
			}
		}
		return next, found
	}
	// checkAccepted checks the effect of an accepted answer.
	checkAccepted := func(c *propCall, attempt int, kind, text string) {
		after := text
		if attempt > 1 {
			after = fmt.Sprintf("%s (after %d attempts)", text, attempt)
		}
		switch {
		case kind == "result":
			if !c.settled || !c.finished.OK || c.finished.Result != text {
				t.Fatalf("%s: result %q accepted but the call has %s", c.id, text, c.finished.Raw)
			}
		case kind == "retryable" && attempt < c.policy.Attempts:
			if c.settled || !c.backingOff {
				t.Fatalf("%s: retryable error accepted on attempt %d of %d but no retry follows", c.id, attempt, c.policy.Attempts)
			}
		default:
			if !c.settled || c.finished.OK || c.finished.Error != after {
				t.Fatalf("%s: %s error %q accepted on attempt %d, but the call has %s", c.id, kind, after, attempt, c.finished.Raw)
			}
		}
	}
	answerFor := func(kind, id string, attempt int, text string) engine.Action {
		switch kind {
		case "result":
			return engine.ToolResult{ID: id, Attempt: attempt, Result: json.RawMessage(mustJSON(t, text))}
		case "retryable":
			return engine.ToolError{ID: id, Attempt: attempt, Error: text, Retryable: true}
		default:
			return engine.ToolError{ID: id, Attempt: attempt, Error: text}
		}
	}
	kinds := []string{"result", "retryable", "terminal"}

	h.send("go")
	h.waitFor("the first tool.started", func(f frame) bool { observe(f); return f.Type == engine.EventToolStarted })
	sync()

	steps := rapid.IntRange(0, 30).Draw(t, "steps")
	for step := range steps {
		switch op := rapid.SampledFrom([]string{"browser", "duplicate", "worker", "clock"}).Draw(t, "op"); op {
		case "browser", "duplicate":
			var pool []*propCall
			for _, c := range calls {
				if c.handler == engine.HandlerClient && (op == "browser" || c.last != nil) {
					pool = append(pool, c)
				}
			}
			if len(pool) == 0 {
				continue
			}
			c := pool[rapid.IntRange(0, len(pool)-1).Draw(t, "call")]
			var a engine.Action
			var attempt int
			var kind, text string
			if op == "duplicate" {
				a = c.last
				switch a := a.(type) {
				case engine.ToolResult:
					attempt, kind = a.Attempt, "result"
					_ = json.Unmarshal(a.Result, &text)
				case engine.ToolError:
					attempt, text, kind = a.Attempt, a.Error, "terminal"
					if a.Retryable {
						kind = "retryable"
					}
				}
			} else {
				switch rapid.IntRange(0, 2).Draw(t, "which attempt") {
				case 0:
					attempt = max(c.live, c.started) // the running one, or the last
				case 1:
					attempt = rapid.IntRange(1, c.started+1).Draw(t, "attempt") // stale or future
				case 2:
					attempt = 0 // omitted: the current one
				}
				kind = rapid.SampledFrom(kinds).Draw(t, "kind")
				text = fmt.Sprintf("%s %s from the browser, attempt %d, step %d", c.id, kind, attempt, step)
				a = answerFor(kind, c.id, attempt, text)
				c.last = a
			}
			accept := !c.settled && c.live != 0 && (attempt == 0 || attempt == c.live)
			live := c.live
			// After settling, a repeat of the last accepted answer is a
			// duplicate (ErrSettled); any other attempt's answer is stale.
			resolved := attempt
			if resolved == 0 {
				resolved = c.started
			}
			duplicate := c.settled && resolved == c.answeredBy
			err := h.s.Answer(context.Background(), a)
			switch {
			case accept && err != nil:
				t.Fatalf("%s: answer for running attempt %d refused: %v", c.id, live, err)
			case accept:
				c.answeredBy = live
			case duplicate && !errors.Is(err, engine.ErrSettled):
				t.Fatalf("%s: a repeat of the settling answer: %v, want ErrSettled", c.id, err)
			case !duplicate && !errors.Is(err, engine.ErrStaleAttempt):
				t.Fatalf("%s: answer for attempt %d (running %d, settled %v): %v, want ErrStaleAttempt", c.id, attempt, live, c.settled, err)
			}
			before := *c
			for _, f := range h.drainBuffered() { // Answer returns after its effects
				observe(f)
			}
			if accept {
				checkAccepted(c, live, kind, text)
			} else if c.started != before.started || c.live != before.live || c.settled != before.settled {
				t.Fatalf("%s: a refused answer changed the call", c.id)
			}

		case "worker":
			var pool []*propCall
			for _, c := range calls {
				if c.handler == engine.HandlerWorker && c.live != 0 {
					pool = append(pool, c)
				}
			}
			if len(pool) == 0 {
				continue
			}
			c := pool[rapid.IntRange(0, len(pool)-1).Draw(t, "call")]
			kind := rapid.SampledFrom(kinds).Draw(t, "kind")
			text := fmt.Sprintf("%s %s from the worker, attempt %d, step %d", c.id, kind, c.live, step)
			var actions []engine.Action
			if c.live > 1 && rapid.Bool().Draw(t, "stale first") {
				actions = append(actions, engine.ToolResult{ID: c.id, Attempt: c.live - 1, Result: json.RawMessage(`"stale"`)})
			}
			if rapid.Bool().Draw(t, "explicit id") {
				actions = append(actions, answerFor(kind, c.id, c.live, text))
			} else {
				actions = append(actions, answerFor(kind, "", 0, text))
			}
			if rapid.Bool().Draw(t, "duplicate after") {
				actions = append(actions, answerFor(rapid.SampledFrom(kinds).Draw(t, "dup kind"), "", 0, "dup"))
			}
			ack := fmt.Sprintf("%d", step)
			actions = append(actions, engine.ClientEvent{Name: "ack", Data: json.RawMessage(ack)})
			live := c.live
			c.answeredBy = live
			answerChan(attemptKey{c.id, live}) <- engine.Decision{Actions: actions}
			h.waitFor("ack "+ack, func(f frame) bool {
				observe(f)
				return f.Type == engine.EventClientEvent && f.Name == "ack" && string(f.Data) == ack
			})
			checkAccepted(c, live, kind, text)

		case "clock":
			next, ok := nextTimer()
			if !ok {
				continue
			}
			gap := next.Sub(now())
			var d time.Duration
			switch rapid.IntRange(0, 2).Draw(t, "how far") {
			case 0:
				d = gap // to the next timer, which fires
			case 1:
				d = 0
			case 2:
				d = gap * time.Duration(rapid.IntRange(0, 99).Draw(t, "percent")) / 100 // short of it
			}
			h.clock.Advance(d)
			sync()
		}
	}

	// Let every open call run out its attempts.
	for range 100 {
		next, ok := nextTimer()
		if !ok {
			break
		}
		h.clock.Advance(next.Sub(now()))
		sync()
	}
	for _, c := range calls {
		if !c.settled {
			t.Fatalf("%s never settled: attempt %d of %d", c.id, c.started, c.policy.Attempts)
		}
	}
	// The last settlement re-prompts the model; wait for its answer and
	// the idle after it (a sync may have read them already).
	answered := func() bool {
		turns := 0
		for _, f := range h.seen {
			if f.Type == engine.EventModelFinished {
				turns++
			}
			if turns == 2 && f.Type == engine.EventSessionIdle {
				return true
			}
		}
		return false
	}
	for !answered() {
		h.waitFor("the model's answer", func(f frame) bool { observe(f); return true })
	}

	// The model saw exactly one outcome per call, in call order: the one
	// the call settled with.
	tm := toolMessages(h.model.last(t).Messages)
	if len(tm) != len(calls) {
		t.Fatalf("the model saw %d tool messages for %d calls", len(tm), len(calls))
	}
	for i, c := range calls {
		want := c.finished.Result
		if !c.finished.OK {
			want = c.finished.Error
		}
		if tm[i].ToolUseID != c.id || tm[i].Content != want || tm[i].IsError == c.finished.OK {
			t.Fatalf("tool message %d is %+v, want %s's outcome %s", i, tm[i], c.id, c.finished.Raw)
		}
	}
	for _, req := range h.model.requests() {
		for _, m := range req.Messages {
			if strings.HasPrefix(m.Content, "late-") || m.Content == "stale" || m.Content == "dup" {
				t.Fatalf("the model saw an answer that must not count: %+v", m)
			}
		}
	}
	if n := h.count(engine.EventModelFinished, ""); n != 2 {
		t.Fatalf("%d model turns, want 2", n)
	}

	// Every browser attempt was dispatched once and released once; every
	// worker attempt ran once.
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := h.e.Close(ctx); err != nil { // waits for the worker's goroutines
		t.Fatal(err)
	}
	dispatched := map[attemptKey]int{}
	for len(b.calls) > 0 {
		cc := <-b.calls
		dispatched[attemptKey{cc.ID, cc.Attempt}]++
	}
	released := map[attemptKey]int{}
	for len(b.releases) > 0 {
		r := <-b.releases
		released[attemptKey{r.ID, r.Attempt}]++
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		for a := 1; a <= c.policy.Attempts+1; a++ {
			k := attemptKey{c.id, a}
			want := 0
			if a <= c.started {
				want = 1
			}
			var got map[attemptKey]int
			if c.handler == engine.HandlerClient {
				// An attempt that ended unanswered (timeout, cancel) is
				// cancelled once; an answered one is not.
				if released[k] > want {
					t.Fatalf("%s attempt %d cancelled %d times, want at most %d", c.id, a, released[k], want)
				}
				got = dispatched
			} else {
				got = executed
			}
			if got[k] != want {
				t.Fatalf("%s attempt %d ran %d times, want %d", c.id, a, got[k], want)
			}
		}
	}
}
