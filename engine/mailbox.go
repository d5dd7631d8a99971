package engine

import (
	"context"
	"sync"
)

// mailbox is a session's inbox and the goroutine that empties it. That
// goroutine runs only while the inbox has messages: put starts one when
// none is running, and it returns once the inbox is empty. An idle session
// (most of them, most of the time: a page open on a chat nobody types in)
// holds no goroutine, no stack and no queue of its own, and one message
// still runs at a time, in the order put.
//
// The session and its sub-agents share one mailbox, as they share one
// goroutine's worth of state.
type mailbox struct {
	mu      sync.Mutex
	queue   []func()      // waiting; nil while the session is idle
	head    int           // queue[head:] wait
	running bool          // a goroutine empties the queue; true for good once the session left
	room    chan struct{} // made while puts wait for room; closed when a message is taken
	run     func()        // empties the inbox with next
	start   func(func())  // runs run on a goroutine (Engine.runners)
}

// inboxSize bounds the messages waiting for a session: past it, put
// waits (with its context) for the session to catch up.
const inboxSize = 64

func newMailbox(run func(), start func(func())) *mailbox {
	return &mailbox{run: run, start: start}
}

// put adds f to the inbox, waiting while it is full, and starts the
// goroutine if none runs. It fails with ctx's error, or with
// ErrSessionClosed once ended is done.
func (m *mailbox) put(ctx context.Context, ended context.Context, f func()) error {
	for {
		m.mu.Lock()
		if len(m.queue)-m.head < inboxSize {
			if m.head > 0 && len(m.queue) == cap(m.queue) {
				// A session that never empties its inbox: reuse the room
				// the taken messages left, rather than grow for ever.
				n := copy(m.queue, m.queue[m.head:])
				clear(m.queue[n:])
				m.queue, m.head = m.queue[:n], 0
			}
			m.queue = append(m.queue, f)
			start := !m.running
			m.running = true
			m.mu.Unlock()
			if start {
				m.start(m.run)
			}
			return nil
		}
		if m.room == nil {
			m.room = make(chan struct{})
		}
		room := m.room
		m.mu.Unlock()
		select {
		case <-room:
		case <-ended.Done():
			return ErrSessionClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// next is the next message, or nil when the inbox is empty and the
// goroutine must return: from then on, the next put starts another.
func (m *mailbox) next() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head == len(m.queue) {
		m.queue, m.head, m.running = nil, 0, false
		return nil
	}
	f := m.queue[m.head]
	m.queue[m.head] = nil
	m.head++
	if m.room != nil {
		close(m.room)
		m.room = nil
	}
	return f
}
