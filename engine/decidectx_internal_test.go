package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The worker's context: cancelled when its time is up or the session's
// context is, and when Decide returns, whether Decide looked at it or not.

func TestDecideCtxEndsWithDecide(t *testing.T) {
	for name, look := range map[string]bool{"looked at during Decide": true, "never looked at during Decide": false} {
		t.Run(name, func(t *testing.T) {
			c := &decideCtx{parent: context.Background(), deadline: time.Now().Add(time.Hour)}
			var child context.Context
			if look {
				if err := c.Err(); err != nil {
					t.Fatalf("Err before its time: %v", err)
				}
				var cancel context.CancelFunc
				child, cancel = context.WithCancel(c)
				defer cancel()
			}
			c.end()
			if child == nil {
				child = c
			}
			// Cancelled by end itself: nothing to wait for.
			if !closed(c.Done()) || !closed(child.Done()) || !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
				t.Errorf("after Decide: %v, derived %v; want context.Canceled", c.Err(), child.Err())
			}
		})
	}
}

func TestDecideCtxTimeUp(t *testing.T) {
	for name, look := range map[string]bool{"waiting on Done": true, "looking after the deadline": false} {
		t.Run(name, func(t *testing.T) {
			c := &decideCtx{parent: context.Background(), deadline: time.Now().Add(time.Millisecond)}
			defer c.end()
			if !look {
				for time.Now().Before(c.deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			<-c.Done()
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Errorf("Err %v, want context.DeadlineExceeded", c.Err())
			}
			if d, ok := c.Deadline(); !ok || !d.Equal(c.deadline) {
				t.Errorf("Deadline %v %v", d, ok)
			}
		})
	}
}

func TestDecideCtxSessionCancelled(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	c := &decideCtx{parent: parent, deadline: time.Now().Add(time.Hour)}
	defer c.end()
	if c.Value(key{}) != "v" {
		t.Errorf("Value %v: the session's context's values are lost", c.Value(key{}))
	}
	cancel()
	<-c.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err %v, want context.Canceled", c.Err())
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestDecideCtxSaysWhoDecides: the session deciding is the context's own
// answer (End from inside Decide asks it), and asking makes no timer.
func TestDecideCtxSaysWhoDecides(t *testing.T) {
	s := &Session{}
	c := &decideCtx{parent: context.Background(), deadline: time.Now().Add(time.Hour), deciding: s}
	defer c.end()
	type workerKey struct{}
	wrapped := context.WithValue(c, workerKey{}, "a worker's own value")
	if got := wrapped.Value(decidingKey{}); got != s {
		t.Errorf("Value(decidingKey) = %v, want the deciding session", got)
	}
	c.mu.Lock()
	made := c.inner != nil
	c.mu.Unlock()
	if made {
		t.Error("asking who decides made the context's timer")
	}
}
