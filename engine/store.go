package engine

import (
	"context"
	"errors"
	"sync"
)

// Store keeps each session's events so a page that reconnects can replay
// what it missed. Seqs of a session start at 1 and increase by one.
type Store interface {
	// Append records ev, whose Seq is one more than the last appended.
	Append(ctx context.Context, session string, ev Event) error
	// Since returns the events of session with Seq > after, in order.
	Since(ctx context.Context, session string, after int64) ([]Event, error)
	// Drop forgets a session.
	Drop(ctx context.Context, session string) error
}

// ErrSeqGap: an event was appended out of order.
var ErrSeqGap = errors.New("event seq out of order")

// MemoryStore is a Store in memory, safe for concurrent use. It forgets
// everything when the process ends.
type MemoryStore struct {
	mu       sync.RWMutex
	sessions map[string][]Event
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{sessions: map[string][]Event{}} }

// Append implements Store.
func (m *MemoryStore) Append(_ context.Context, session string, ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	events := m.sessions[session]
	if ev.Seq != int64(len(events))+1 {
		return ErrSeqGap
	}
	m.sessions[session] = append(events, ev)
	return nil
}

// Since implements Store.
func (m *MemoryStore) Since(_ context.Context, session string, after int64) ([]Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	events := m.sessions[session]
	if after < 0 {
		after = 0
	}
	if after >= int64(len(events)) {
		return nil, nil
	}
	// Seqs are contiguous from 1, so the event after `after` is at index after.
	return append([]Event(nil), events[after:]...), nil
}

// Drop implements Store.
func (m *MemoryStore) Drop(_ context.Context, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, session)
	return nil
}
