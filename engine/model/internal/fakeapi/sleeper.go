package fakeapi

import (
	"context"
	"sync"
	"time"
)

// Sleeper records the waits between attempts instead of sleeping. Its Sleep
// fits a provider's Options.Sleep.
type Sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

// Sleep records d and returns at once, with ctx's error if it is done.
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

// Got returns a copy of the waits recorded so far.
func (s *Sleeper) Got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}
