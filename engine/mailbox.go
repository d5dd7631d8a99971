package engine

import "sync/atomic"

// mailbox is a session's inbox and the goroutine that empties it. That
// goroutine runs only while the inbox has messages: post starts it when
// none is running, and it returns once the inbox is empty. An idle session
// (most of them, most of the time: a page open on a chat nobody types in)
// holds no goroutine and no stack of its own, and one message still runs
// at a time, in the order posted.
//
// The session and its sub-agents share one mailbox, as they share one
// goroutine's worth of state.
type mailbox struct {
	inbox chan func()
	// running is true from the moment a goroutine is asked for until it
	// sees the inbox empty; it stays true for good once the session left,
	// so nothing starts another.
	running atomic.Bool
	run     func()       // empties the inbox with next
	start   func(func()) // runs run on a goroutine (Engine.runners)
}

// inboxSize bounds the messages waiting for a session: past it, post
// waits (with its context) for the session to catch up.
const inboxSize = 64

func newMailbox(run func(), start func(func())) *mailbox {
	return &mailbox{inbox: make(chan func(), inboxSize), run: run, start: start}
}

// wake starts the goroutine if none runs. Called after every send, it
// never misses a message: a goroutine that is leaving stores running =
// false before it looks at the inbox one last time (see run).
func (m *mailbox) wake() {
	if m.running.CompareAndSwap(false, true) {
		m.start(m.run)
	}
}

// next is the next message, or nil when the inbox is empty and this
// goroutine should return. A message posted between the empty inbox and
// running = false either finds running false and starts a goroutine, or is
// seen here by the second look.
func (m *mailbox) next() func() {
	for {
		select {
		case f := <-m.inbox:
			return f
		default:
		}
		m.running.Store(false)
		if len(m.inbox) == 0 || !m.running.CompareAndSwap(false, true) {
			return nil
		}
	}
}
