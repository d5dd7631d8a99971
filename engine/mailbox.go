package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// mailbox is a session's inbox and the goroutine that empties it. That
// goroutine runs only while the inbox has messages: put starts one when
// none is running, and it returns once the inbox is empty. An idle session
// (most of them, most of the time: a page open on a chat nobody types in)
// holds no goroutine, no stack and no queue of its own, and one message
// still runs at a time, in the order put.
//
// A caller that waits for its message's reply anyway (Session.do) may run
// the message itself when the session is idle (putHere): the session then
// takes no hand-off to another goroutine and back, which is most of a
// page's round trip through an idle session. Whoever runs the messages,
// one runs at a time: running is the session's state's owner token.
//
// The session and its sub-agents share one mailbox, as they share one
// goroutine's worth of state.
type mailbox struct {
	mu      sync.Mutex
	queue   []func()            // waiting; nil while the session is idle
	head    int                 // queue[head:] wait
	running bool                // a goroutine empties the queue; true for good once the session left
	room    chan struct{}       // made while puts wait for room; closed when a message is taken
	step    func(func()) func() // runs one message; non-nil: the session left (running stays set), and the rest of its leaving to run
	start   func(func())        // runs run on a goroutine (Engine.runners)
}

// inboxSize bounds the messages waiting for a session: past it, put
// waits (with its context) for the session to catch up.
const inboxSize = 64

func newMailbox(step func(func()) func(), start func(func())) *mailbox {
	return &mailbox{step: step, start: start}
}

// run empties the inbox, one message at a time, and returns once it is
// empty or the session left.
func (m *mailbox) run() {
	for f := m.next(); f != nil; f = m.next() {
		if leave := m.step(f); leave != nil {
			leave()
			return
		}
	}
}

// put adds f to the inbox, waiting while it is full, and starts the
// goroutine if none runs. It fails with ctx's error, or once ended is
// done with why it is (leftErr).
func (m *mailbox) put(ctx context.Context, ended context.Context, f func()) error {
	_, err := m.add(ctx, ended, f, false)
	return err
}

// putHere is put for a caller that waits for f to run: when the session
// is idle, f runs on the caller's goroutine before putHere returns, and
// messages put meanwhile go on on another goroutine. So does the rest of
// the session's leaving when f ended it: it waits for the session's
// workers, which the caller must not (it may be one of them, or have a
// deadline).
func (m *mailbox) putHere(ctx context.Context, ended context.Context, f func()) error {
	here, err := m.add(ctx, ended, f, true)
	if !here {
		return err
	}
	f = m.next() // f itself: the inbox was empty
	defer crashOnPanic()
	if leave := m.step(f); leave != nil {
		m.start(leave)
		return nil
	}
	if !m.idle() {
		m.start(m.run)
	}
	return nil
}

// idle marks the inbox idle when it is empty, and reports whether it was.
func (m *mailbox) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idleLocked()
}

// idleLocked is idle with m.mu held: from then on, the next put starts a
// goroutine.
func (m *mailbox) idleLocked() bool {
	if m.head < len(m.queue) {
		return false
	}
	m.queue, m.head, m.running = nil, 0, false
	return true
}

// add queues f, waiting for room. here: the inbox was idle and the caller
// runs it (it is marked running); otherwise a goroutine was started if
// none ran.
func (m *mailbox) add(ctx context.Context, ended context.Context, f func(), here bool) (bool, error) {
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
			if start && here {
				return true, nil
			}
			if start {
				m.start(m.run)
			}
			return false, nil
		}
		if m.room == nil {
			m.room = make(chan struct{})
		}
		room := m.room
		m.mu.Unlock()
		select {
		case <-room:
		case <-ended.Done():
			return false, leftErr(ended)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// next is the next message, or nil when the inbox is empty and the
// goroutine must return: from then on, the next put starts another.
func (m *mailbox) next() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.idleLocked() {
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

// crashOnPanic ends the process when a step run by putHere panics, as it
// would on the session's own goroutine: the caller's recover (an HTTP
// handler's, the frame handler's) would otherwise leave the session stuck
// mid-step, its inbox never emptied again.
func crashOnPanic() {
	if p := recover(); p != nil {
		stack := debug.Stack()
		go panic(fmt.Sprintf("session step panicked: %v\n\n%s", p, stack))
		select {}
	}
}
