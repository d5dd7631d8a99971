package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// ErrSlowSubscriber: a page's stream held more frames than its buffer, so it
// was dropped rather than let it hold up the session.
var ErrSlowSubscriber = errors.New("page could not keep up")

// eventLog numbers a session's events, records them in the store and puts
// them on every attached page's stream; deliveries go on one page's stream.
// Its lock orders everything a page receives: the session goroutine and the
// model's stream (which publishes deltas without a trip through the session
// goroutine) both write under it, so a frame is after every frame written
// before it, on every page.
type eventLog struct {
	mu      sync.Mutex
	session string
	seq     int64
	store   Store
	logger  *slog.Logger
	pages   map[*Page]struct{}
	closed  bool
}

// publish gives payload the next seq, stores it and puts it on every page.
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
		// The live pages still get it; only a replay would miss it.
		l.logger.Error("failed to store event", "session", l.session, "seq", ev.Seq, "type", typ, "err", err)
	}
	for p := range l.pages {
		l.push(p, ev)
	}
	return ev, nil
}

// deliver puts a page's own frame on its stream, after everything written
// to it before. It reports false when the page is no longer attached.
func (l *eventLog) deliver(p *Page, typ string, frame json.RawMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.pages[p]; !ok {
		return false
	}
	l.push(p, Event{Type: typ, Frame: frame})
	_, ok := l.pages[p]
	return ok
}

// push appends ev to p's stream; l.mu is held. A page that has not taken
// its frames for p.limit frames is dropped.
func (l *eventLog) push(p *Page, ev Event) {
	if p.pushed >= p.limit {
		p.queue = nil
		l.drop(p, ErrSlowSubscriber)
		return
	}
	p.pushed++
	p.queue = append(p.queue, ev)
	if len(p.queue) == 1 {
		p.signal()
	}
}

// attach puts session.opened and the stored events after `after` on p's
// stream, then adds p to the pages every later event goes to: no gap and no
// overlap between the replay and what follows.
func (l *eventLog) attach(p *Page, after int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrSessionClosed
	}
	if after > l.seq {
		return fmt.Errorf("after %d is beyond the session's last event %d", after, l.seq)
	}
	replay, err := l.store.Since(context.Background(), l.session, after)
	if err != nil {
		return fmt.Errorf("failed to read events after %d: %w", after, err)
	}
	last := after
	if n := len(replay); n > 0 {
		last = replay[n-1].Seq
	}
	opened, err := EncodeFrame(FrameSessionOpened, SessionOpenedFrame{Session: l.session, Seq: last, Page: p.id})
	if err != nil {
		return err
	}
	// The replay does not count against the page's buffer: it is read
	// already, and the page asked for it.
	p.queue = make([]Event, 0, len(replay)+1)
	p.queue = append(append(p.queue, Event{Type: FrameSessionOpened, Frame: opened}), replay...)
	l.pages[p] = struct{}{}
	p.signal()
	return nil
}

// drop ends p's stream with err (nil: the page detached); l.mu is held.
func (l *eventLog) drop(p *Page, err error) {
	if _, ok := l.pages[p]; !ok {
		return
	}
	delete(l.pages, p)
	p.err = err
	close(p.done)
	p.signal()
}

// take hands p's queued frames over; see Page.Take.
func (l *eventLog) take(p *Page, buf []Event) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := p.queue
	p.queue = buf[:0]
	p.pushed = 0
	return out
}

// lastSeq is the seq of the latest event.
func (l *eventLog) lastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// close ends every page's stream after what is queued on it; later
// publishes fail.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for p := range l.pages {
		l.drop(p, ErrSessionClosed)
	}
}
