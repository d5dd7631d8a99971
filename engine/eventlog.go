package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// ErrSlowSubscriber: a subscriber's buffer filled up, so it was dropped
// rather than let it hold up the session.
var ErrSlowSubscriber = errors.New("subscriber could not keep up")

// eventLog numbers a session's events, records them in the store and fans
// them out. It has its own lock, so the model's stream can publish deltas
// without a trip through the session goroutine.
type eventLog struct {
	mu      sync.Mutex
	session string
	seq     int64
	store   Store
	logger  *slog.Logger
	subs    map[*Subscription]struct{}
	closed  bool
}

// Subscription receives a session's live events in seq order.
type Subscription struct {
	log  *eventLog
	c    chan Event
	done chan struct{}
	err  error // set before done closes
}

// C delivers events. It is never closed; watch Done.
func (s *Subscription) C() <-chan Event { return s.c }

// Done closes when the subscription ends: Close, the session ended, or the
// subscriber fell behind (Err says which).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err says why Done closed: nil after Close, ErrSessionClosed, or
// ErrSlowSubscriber.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.log.drop(s, nil)
}

// drop ends sub with err; l.mu is held.
func (l *eventLog) drop(sub *Subscription, err error) {
	if _, ok := l.subs[sub]; !ok {
		return
	}
	delete(l.subs, sub)
	sub.err = err
	close(sub.done)
}

// publish gives payload the next seq, stores it and fans it out.
func (l *eventLog) publish(typ string, payload any) (Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Event{}, ErrSessionClosed
	}
	frame, err := encodeEvent(typ, l.seq+1, payload)
	if err != nil {
		return Event{}, fmt.Errorf("failed to encode %s event: %w", typ, err)
	}
	l.seq++
	ev := Event{Seq: l.seq, Type: typ, Frame: frame}
	if err := l.store.Append(context.Background(), l.session, ev); err != nil {
		// The live subscribers still get it; only a replay would miss it.
		l.logger.Error("failed to store event", "session", l.session, "seq", ev.Seq, "type", typ, "err", err)
	}
	for sub := range l.subs {
		select {
		case sub.c <- ev:
		default:
			l.drop(sub, ErrSlowSubscriber)
		}
	}
	return ev, nil
}

// subscribe returns the stored events after `after` and a subscription for
// every event after those, with no gap and no overlap between them.
func (l *eventLog) subscribe(after int64, buffer int) ([]Event, *Subscription, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrSessionClosed
	}
	if after > l.seq {
		return nil, nil, fmt.Errorf("after %d is beyond the session's last event %d", after, l.seq)
	}
	replay, err := l.store.Since(context.Background(), l.session, after)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read events after %d: %w", after, err)
	}
	if buffer <= 0 {
		buffer = 256
	}
	sub := &Subscription{log: l, c: make(chan Event, buffer), done: make(chan struct{})}
	l.subs[sub] = struct{}{}
	return replay, sub, nil
}

// lastSeq is the seq of the latest event.
func (l *eventLog) lastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// close ends every subscription; later publishes fail.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for sub := range l.subs {
		l.drop(sub, ErrSessionClosed)
	}
}
