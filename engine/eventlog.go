package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/clienttools/gateway/metrics"
)

// ErrSlowSubscriber: a page's stream held more frames than its buffer, so it
// was dropped rather than let it hold up the session.
var ErrSlowSubscriber = errors.New("page could not keep up")

// eventLog numbers a session's events, writes them to the store and only
// then puts them on the pages' streams (write-ahead): a page never sees an
// event the store could lose. Its lock orders everything a page receives:
// the session goroutine and the model's stream (which publishes deltas
// without a trip through the session goroutine) both write under it.
//
// The session goroutine opens a batch for each message it handles; what it
// publishes and delivers meanwhile goes to the store in one Append with the
// session's state after it, so the journal never holds half of a step. A
// batch the store refuses waits, in order, and is retried; its frames reach
// the pages once it is stored.
type eventLog struct {
	mu      sync.Mutex
	session string
	seq     int64     // the last seq handed out
	events  eventList // stored events, for replays
	store   Store
	logger  *slog.Logger
	pages   map[*Page]struct{}
	closed  bool

	batch     *pendingBatch  // open while the session goroutine handles a message
	pending   []pendingBatch // closed, not stored yet (the store failed)
	lastState json.RawMessage
	storeErr  error // the last Append's error, until one succeeds
	onStore   func(error)
	metrics   *metrics.Metrics
}

// pendingBatch is a step of the session on its way to the store: numbered
// events for every page and deliveries for one, in the order they were made.
type pendingBatch struct {
	items []pendingItem
	state json.RawMessage
}

type pendingItem struct {
	ev   Event
	page *Page // nil: a session event, for every page
}

// begin opens the batch of one step of the session goroutine.
func (l *eventLog) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batch = &pendingBatch{}
}

// commit closes the batch with the session's state after it and stores it,
// with any batch still waiting before it; on success its frames go to the
// pages. It reports the store's error, and false when nothing changed.
// state is copied when it is kept: the caller may reuse it.
func (l *eventLog) commit(state json.RawMessage) (changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.batch
	l.batch = nil
	if b != nil && (len(b.items) > 0 || !bytes.Equal(state, l.lastState)) {
		b.state = bytes.Clone(state)
		l.pending = append(l.pending, *b)
		changed = true
	}
	l.flush()
	return changed, l.storeErr
}

// flush stores the waiting batches in order and hands their frames to the
// pages; l.mu is held.
func (l *eventLog) flush() {
	for len(l.pending) > 0 {
		b := l.pending[0]
		batch := Batch{State: b.state}
		for _, it := range b.items {
			if it.page == nil {
				batch.Events = append(batch.Events, it.ev)
			}
		}
		start := time.Now()
		err := l.store.Append(context.Background(), l.session, batch)
		l.metrics.StoreAppend(time.Since(start), err)
		if err != nil {
			if l.storeErr == nil {
				l.logger.Error("failed to store the session's events: they wait, and the session takes no new turn", "session", l.session, "err", err)
			}
			l.storeErr = err
			if l.onStore != nil {
				l.onStore(err)
			}
			return
		}
		if l.storeErr != nil {
			l.logger.Info("the store took the session's events again", "session", l.session)
			l.storeErr = nil
			if l.onStore != nil {
				l.onStore(nil)
			}
		}
		l.pending = l.pending[1:]
		if b.state != nil {
			l.lastState = b.state
		}
		l.events.append(batch.Events...)
		for _, it := range b.items {
			if it.page == nil {
				for p := range l.pages {
					l.push(p, it.ev)
				}
			} else if _, ok := l.pages[it.page]; ok {
				l.push(it.page, it.ev)
			}
		}
	}
}

// failing returns the store's error while batches wait for it.
func (l *eventLog) failing() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return nil
	}
	return l.storeErr
}

// publish gives payload the next seq. In a batch it waits for the batch's
// commit; outside one (the model's deltas) it is stored and sent at once.
func (l *eventLog) publish(typ, parent string, payload any) (Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Event{}, ErrSessionClosed
	}
	frame, err := encodeEvent(typ, l.seq+1, parent, payload)
	if err != nil {
		return Event{}, fmt.Errorf("failed to encode %s event: %w", typ, err)
	}
	l.seq++
	ev := Event{Seq: l.seq, Type: typ, Frame: frame}
	l.add(pendingItem{ev: ev})
	return ev, nil
}

// deliver puts a page's own frame on its stream, after everything put there
// before it. It reports false when the page is no longer attached.
func (l *eventLog) deliver(p *Page, typ string, frame json.RawMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.pages[p]; !ok {
		return false
	}
	l.add(pendingItem{ev: Event{Type: typ, Frame: frame}, page: p})
	return true
}

// add puts an item in the open batch, or in a batch of its own; l.mu is
// held.
func (l *eventLog) add(it pendingItem) {
	if l.batch != nil {
		l.batch.items = append(l.batch.items, it)
		return
	}
	l.pending = append(l.pending, pendingBatch{items: []pendingItem{it}})
	l.flush()
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
	last := int64(l.events.len())
	if after > last {
		return fmt.Errorf("%w: after %d is beyond the session's last event %d", ErrBadRequest, after, last)
	}
	if after < 0 {
		after = 0
	}
	opened, err := EncodeFrame(FrameSessionOpened, SessionOpenedFrame{Session: l.session, Seq: last, Page: p.id, Limits: &p.limits})
	if err != nil {
		return err
	}
	// The replay does not count against the page's buffer: the page asked
	// for it. Seqs are contiguous from 1: the event after `after` is at
	// index after.
	p.queue = make([]Event, 0, last-after+1)
	p.queue = l.events.appendAfter(append(p.queue, Event{Type: FrameSessionOpened, Frame: opened}), int(after))
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

// lastSeq is the seq of the latest stored event.
func (l *eventLog) lastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.events.len())
}

// close ends every page's stream with err, after what is queued on it;
// later publishes fail.
func (l *eventLog) close(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for p := range l.pages {
		l.drop(p, err)
	}
}
