package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and schedules callbacks.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled callback.
type Timer interface {
	// Stop cancels the callback; it reports whether that prevented it.
	Stop() bool
}

// Sleep waits d on c, or until ctx ends, whose error it then returns.
// A d of zero or less returns at once.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock for tests. Its zero value is not usable; call NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int
	armed  chan struct{} // closed at the next AfterFunc, for WaitPending; nil: no one waits
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c    *Fake
	at   time.Time
	seq  int
	f    func()
	done bool
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for when the fake time reaches Now()+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return t
}

// Stop cancels the timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the time forward by d and runs every timer that falls due,
// earliest first, each synchronously in the caller's goroutine.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		next := c.nextDue(target)
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending reports how many timers are scheduled and not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending()
}

// WaitPending blocks until at least n timers are pending, or ctx ends,
// whose error it then returns: a test waits for the code under test to
// arm its timer before it moves the clock, without spinning on Pending.
func (c *Fake) WaitPending(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if c.pending() >= n {
			c.mu.Unlock()
			return nil
		}
		if c.armed == nil {
			c.armed = make(chan struct{})
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pending counts the live timers; c.mu is held.
func (c *Fake) pending() int {
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// nextDue returns the earliest live timer due by target; c.mu is held.
func (c *Fake) nextDue(target time.Time) *fakeTimer {
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.done {
			live = append(live, t)
		}
	}
	c.timers = live
	sort.SliceStable(live, func(i, j int) bool {
		if !live[i].at.Equal(live[j].at) {
			return live[i].at.Before(live[j].at)
		}
		return live[i].seq < live[j].seq
	})
	if len(live) == 0 || live[0].at.After(target) {
		return nil
	}
	return live[0]
}
