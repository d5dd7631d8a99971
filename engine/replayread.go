package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clienttools/gateway/clock"
)

// olderEvents reads the session's events from seq from to through from
// the store: a replay from before what the session keeps in memory. Pages
// that resume while a read is under way share it (a chat opened in many
// tabs at once is read once). A journal that ends before through is read
// again a few times, as a store whose replicas lag may answer with one
// (Store.Load); still short, the store counts as unavailable.
func (s *Session) olderEvents(ctx context.Context, from, through int64) ([]Event, error) {
	wait := olderRetryWait
	for try := 1; ; try++ {
		events, err := s.readJournal(ctx, from, through)
		if err != nil {
			return nil, err
		}
		// events run from seq from or earlier (a read shared with a page
		// that resumes from before this one).
		if len(events) > 0 && events[len(events)-1].Seq >= through {
			start := events[0].Seq
			return events[from-start : through-start+1 : through-start+1], nil
		}
		if try == olderTries {
			end := from - 1
			if len(events) > 0 {
				end = events[len(events)-1].Seq
			}
			return nil, fmt.Errorf("%w: session %s's journal, read %d times for a replay, ends at event %d, before %d", ErrStoreUnavailable, s.id, try, end, through)
		}
		if err := clock.Sleep(ctx, s.e.opts.Clock, wait); err != nil {
			return nil, err
		}
		wait *= 2
	}
}

// journalRead is one read of a session's journal for replays: its events
// from seq from, their frames copied out of the store's messages into one
// buffer, so that what a page's replay holds is its frames alone.
type journalRead struct {
	from   int64
	done   chan struct{}
	events []Event
	err    error
	joined int // the callers that wait on it besides its own (readingMu)
}

// readJournal returns the journal's events from seq from (or earlier), for
// a replay through seq through: from the read under way if it starts there
// or not much before (it reads no more events before from than the page
// needs from it on), else from a read of its own, which the pages after it
// share, unless the one under way starts earlier (a page that lacks a few
// events does not wait for a whole chat's read, nor take its place). A
// read that another page's context ended is no answer: it reads again.
func (s *Session) readJournal(ctx context.Context, from, through int64) ([]Event, error) {
	for {
		s.readingMu.Lock()
		r := s.reading
		mine := r == nil || r.from > from || from-r.from > through-from+1
		if mine {
			shared := r == nil || r.from > from
			r = &journalRead{from: from, done: make(chan struct{})}
			if shared {
				// Also in place of a read from later on under way: every
				// page that comes can join this one.
				s.reading = r
			}
		} else {
			r.joined++
		}
		s.readingMu.Unlock()
		if mine {
			start := time.Now()
			r.events, r.err = s.loadEvents(ctx, from)
			s.e.opts.Metrics.ReplayRead(time.Since(start), r.err)
			if r.err == nil {
				s.baseLogger.Info("journal read for a replay", "from", from, "events", len(r.events), "took", time.Since(start))
			} else if ctx.Err() == nil {
				s.baseLogger.Warn("failed to read the journal for a replay", "from", from, "took", time.Since(start), "err", r.err)
			}
			s.readingMu.Lock()
			if s.reading == r {
				s.reading = nil
			}
			s.readingMu.Unlock()
			close(r.done)
			return r.events, r.err
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err == nil || !(errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)) {
			return r.events, r.err
		}
	}
}

// loadEvents reads the journal's events from seq from on, with one
// LoadFrom where the store has it (JournalFrom), else one Load, checks
// their seqs follow one another, and copies their frames into one buffer.
func (s *Session) loadEvents(ctx context.Context, from int64) ([]Event, error) {
	var batches []Batch
	var err error
	if js, ok := s.e.opts.Store.(JournalFrom); ok && from > 1 {
		batches, err = js.LoadFrom(ctx, s.id, from)
	} else {
		batches, err = s.e.opts.Store.Load(ctx, s.id)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: failed to read session %s's journal for a replay: %w", ErrStoreUnavailable, s.id, err)
	}
	n, size := 0, 0
	for _, b := range batches {
		for _, ev := range b.Events {
			if ev.Seq >= from {
				n++
				size += len(ev.Frame)
			}
		}
	}
	events, frames := make([]Event, 0, n), make([]byte, 0, size)
	want := int64(0) // the seq the next event must have; 0: the first, at from or before
	for _, b := range batches {
		for _, ev := range b.Events {
			if want == 0 && ev.Seq > from {
				return nil, fmt.Errorf("%w: session %s's journal, read from event %d, starts at %d", ErrCorrupt, s.id, from, ev.Seq)
			}
			if want != 0 && ev.Seq != want {
				return nil, fmt.Errorf("%w: session %s's journal has event %d where %d should be", ErrCorrupt, s.id, ev.Seq, want)
			}
			want = ev.Seq + 1
			if ev.Seq < from {
				continue
			}
			at := len(frames)
			frames = append(frames, ev.Frame...)
			events = append(events, Event{Seq: ev.Seq, Type: ev.Type, Frame: frames[at:len(frames):len(frames)]})
		}
	}
	return events, nil
}

// olderTries is how many times olderEvents reads a journal that ends
// short; olderRetryWait, the first wait between two, doubles each time
// (about 0.3 s in all).
const (
	olderTries     = 5
	olderRetryWait = 20 * time.Millisecond
)
