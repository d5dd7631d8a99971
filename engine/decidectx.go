package engine

import (
	"context"
	"sync"
	"time"

	"github.com/clienttools/gateway/clock"
)

// decideCtx is the context a worker's Decide gets: the session's context
// bounded by DecideTimeout, as context.WithDeadline makes it, and cancelled
// when Decide returns. That context (its timer, its registration with the
// session's) is made only when Decide first asks for Done, Err or a Value:
// a worker that answers without looking (an in-process WorkerFunc) costs
// no timer. Once made it answers everything; made after Decide returned, it
// is cancelled at once, so the context never outlives its Decide. It says
// itself which session decides (decidingKey), which Session.End asks.
type decideCtx struct {
	parent   context.Context
	deadline time.Time
	deciding *Session
	// storing: once Decide has taken slowDecision, the deciding session
	// stores its step so far (Session.storeSoFar), on the timer's
	// goroutine, while the session's waits for Decide. Armed with the
	// context: a worker that never looks at its context answers without
	// waiting on anything.
	storing bool

	mu     sync.Mutex
	inner  context.Context // nil until first asked for
	cancel context.CancelFunc
	ended  bool        // Decide returned
	watch  clock.Timer // slow's, once armed

	// lent orders the store with the session's goroutine: held while
	// slow runs, and taken by end, after which slow does nothing.
	lent     sync.Mutex
	returned bool
}

func (c *decideCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *decideCtx) Done() <-chan struct{}       { return c.ctx().Done() }
func (c *decideCtx) Err() error                  { return c.ctx().Err() }
func (c *decideCtx) Value(key any) any {
	switch key.(type) {
	case decidingKey:
		return c.deciding // a sub-agent's Decide is its session's
	case inStepKey:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.ended {
			return nil // Decide returned: its step is over
		}
		return c.deciding
	}
	return c.ctx().Value(key)
}

// ctx is the context.WithDeadline this one stands for, made on first use.
func (c *decideCtx) ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.ended {
			c.cancel()
		} else if c.storing {
			// Locked around the arming: what the session's goroutine did
			// before Decide happens before the store.
			c.lent.Lock()
			c.watch = c.deciding.e.opts.Clock.AfterFunc(slowDecision, c.slow)
			c.lent.Unlock()
		}
	}
	return c.inner
}

// slow stores the deciding session's step so far unless Decide has
// returned.
func (c *decideCtx) slow() {
	c.lent.Lock()
	defer c.lent.Unlock()
	if !c.returned {
		c.deciding.storeSoFar()
	}
}

// end cancels the context: its Decide returned. It waits for a store under
// way, and none starts after it.
func (c *decideCtx) end() {
	c.mu.Lock()
	c.ended = true
	if c.cancel != nil {
		c.cancel()
	}
	watch := c.watch
	c.mu.Unlock()
	if watch != nil {
		watch.Stop()
		c.lent.Lock()
		c.returned = true
		c.lent.Unlock()
	}
}
