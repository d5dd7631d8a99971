package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// steppedClock is a process's clock whose wall clock an NTP step moves:
// timers run on elapsed time (the fake's Advance), Now reads the wall
// clock, offset by the steps. A deadline read back from the store has no
// monotonic reading, so Go compares it by the wall clock, as here.
type steppedClock struct {
	*clock.Fake
	mu     sync.Mutex
	offset time.Duration
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Fake.Now().Add(c.offset)
}

func (c *steppedClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// TestDeadlineAfterAClockStep: a client call loaded from the store after a
// restart times out when its deadline's time has passed, however the wall
// clock steps meanwhile. Stepped back (by 200 ms or an hour), the attempt's
// timer fired, found the wall clock short of the stored deadline, and
// armed nothing: the call waited for ever (an outside audit of clocks).
func TestDeadlineAfterAClockStep(t *testing.T) {
	for _, step := range []time.Duration{-200 * time.Millisecond, -time.Hour, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			store := engine.NewMemoryStore()
			clk := &steppedClock{Fake: clock.NewFake(epoch)}
			w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s", Backoff: "1s"})
			m := callsThenSummary(use("call_1", "confirm", `{}`))
			start := func() *engine.Engine {
				w.agent.Model = "fake-model"
				e, err := engine.New(engine.Options{Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil }),
					Store: store, Clock: clk, Logger: quiet(), Retain: -1, Rand: half})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			e1 := start()
			s1 := callInFlight(t, e1)
			stop(t, e1)
			seen := int64(len(stored(t, store, s1.ID())))
			clk.Advance(10 * time.Second) // 20 s of the attempt's 30 left

			e2 := start()
			t.Cleanup(func() { stop(t, e2) })
			s2, err := e2.Load(context.Background(), s1.ID())
			if err != nil {
				t.Fatal(err)
			}
			p2 := attach(t, s2, seen, "confirm")
			p2.until("the call again", isType(engine.FrameToolCall))
			clk.step(step)
			clk.Advance(20 * time.Second) // its deadline, in elapsed time
			p2.until("attempt 1 timed out, attempt 2 after its backoff", isType(engine.EventToolRetrying))
		})
	}
}
