package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// look is what the look for sessions no node runs (adoptOrphans) keeps
// between looks: the sessions whose last summary says busy, brought up to
// date from the summaries written since the last look, so a look costs
// what the cluster wrote meanwhile, not every summary the store keeps
// (about 3.5 s of CPU at a million sessions, every --lease-ttl, on every
// node). Only the adopter's timer, one run at a time, uses it.
type look struct {
	feed    SummaryFeed
	cursor  uint64              // where the next read of the feed starts
	wholeAt time.Time           // the last read of every summary
	busy    map[string]struct{} // busy and not ended, as last summarized
	// unadoptable: sessions found unreadable, and when (tried again an
	// hour later); listingWarned: when a failed read was last said.
	unadoptable   map[string]time.Time
	listingWarned time.Time
	// failedReads: the looks in a row whose read of the store, or write
	// (WriteProber), failed.
	failedReads int
}

// lookFailures is how many looks in a row must fail to read the store
// before the node's health says the store is down: one is a stream
// electing its leader after a NATS server died (seconds), which every
// node would see at once, and report together, taking the whole cluster
// out of its load balancer's rotation for nothing.
const lookFailures = 2

// probeTimeout bounds the look's write: one a store answers takes
// milliseconds, and a look that waited for an unanswered one as long as
// for a read would space the looks out, and the word that the store is
// down with them.
const probeTimeout = 2 * time.Second

// lookWhole is how often the look reads every summary, not only those
// written since: a backstop for what an incremental read cannot see (a
// summaries' bucket lost and begun again, its sequence numbers with it).
const lookWhole = time.Hour

// adoptOrphans loads the sessions with work in flight that are not in
// memory here and whose lease no node holds: the node that ran them died
// (its leases expired) or stopped. Those another node runs are refused by
// their lease at once, and left to it.
func (e *Engine) adoptOrphans() {
	if e.StoreHealth() != nil {
		// Down, it is said where it fails; the next look finds them.
		return
	}
	l := e.look
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := e.readBusy(ctx)
	if err == nil {
		err = e.probeWrite(ctx)
	}
	// The look's read and write are the node's own word on the store,
	// every look, when no session of its own writes (an idle node, a
	// cluster without its quorum): the node's health says it too, once it
	// lasts.
	failed := l.failedReads >= lookFailures // the node's health says so
	l.failedReads++
	if err == nil {
		l.failedReads = 0
	}
	// A change of the node's health is said each time, before it is
	// made: /readyz answers 503 from the first, and an operator whose
	// load balancer took the node out looks for why.
	switch {
	case err == nil && failed:
		e.opts.Logger.Info("the node's look reads and writes the store again")
	case err != nil && !failed && l.failedReads >= lookFailures:
		l.listingWarned = e.opts.Clock.Now()
		e.opts.Logger.Warn("the node could not read or write the store at two looks in a row: not ready (/readyz 503) until a look can; sessions in memory go on as their own writes allow", "err", err)
	case err != nil:
		if now := e.opts.Clock.Now(); now.Sub(l.listingWarned) >= time.Hour {
			l.listingWarned = now
			e.opts.Logger.Warn("the look for sessions no node runs could not read or write the store; tried again every look, said again in an hour", "err", err)
		}
	}
	if err == nil || l.failedReads >= lookFailures {
		e.lookResult(err)
	}
	if err != nil {
		return
	}
	var adopted []string
	for id := range l.busy {
		if e.closing.Load() {
			break
		}
		if e.inMemory(id) {
			continue // its next summary says when it is idle
		}
		if at, ok := l.unadoptable[id]; ok && e.opts.Clock.Now().Sub(at) < time.Hour {
			continue
		}
		if node, err := e.RunsElsewhere(ctx, id); err == nil && node != "" {
			continue // as ErrOwnedElsewhere below, for half the requests
		}
		switch _, err := e.loadBusy(ctx, id); {
		case err == nil:
			adopted = append(adopted, id)
		case errors.Is(err, ErrOwnedElsewhere):
			// Another node runs it: looked at again until its summary
			// says it is idle.
		case errors.Is(err, ErrSessionClosed), errors.Is(err, ErrNoSession):
			delete(l.busy, id) // it ended, or went, since its summary
		case errors.Is(err, ErrCorrupt):
			// Reading it again reads the same bytes until it is restored:
			// tried, and said, once an hour.
			l.unadoptable[id] = e.opts.Clock.Now()
			e.opts.Logger.Error("a session no node runs cannot be read: it waits for its journal to be restored (docs/storage.md)", "session", id, "err", err)
		default:
			e.opts.Logger.Warn("failed to load a session no node runs", "session", id, "err", err)
		}
	}
	if len(adopted) > 0 {
		e.opts.Logger.Info("took over sessions with work in flight that no node ran", "sessions", len(adopted), "first", adopted[0])
	}
}

// probeWrite asks a WriteProber store whether it takes writes, within
// probeTimeout: nil for a store that cannot say.
func (e *Engine) probeWrite(ctx context.Context) error {
	p, ok := e.opts.Store.(WriteProber)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := p.ProbeWrite(ctx); err != nil {
		return fmt.Errorf("the store takes no writes: %w", err)
	}
	return nil
}

// readBusy brings the look's busy sessions up to date: from every summary
// at the first look and each lookWhole after it, else from those written
// since the last look.
func (e *Engine) readBusy(ctx context.Context) error {
	l := e.look
	now := e.opts.Clock.Now()
	cursor := l.cursor
	if l.wholeAt.IsZero() || now.Sub(l.wholeAt) >= lookWhole {
		cursor = 0
	} else {
		// What a look reads between its whole reads takes milliseconds:
		// one that waits on a stream without a leader fails by the next
		// look, not a minute later, when the store may be back.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(e.opts.Adopt, 5*time.Second))
		defer cancel()
	}
	ch, err := l.feed.SummariesChanged(ctx, cursor)
	if err != nil && (ch.Whole || ch.Cursor <= cursor) {
		return err // nothing read to keep
	}
	// What was read before an error is kept, and the next look goes on
	// from it: a backlog read in pieces is read all the same.
	if ch.Whole {
		clear(l.busy)
		l.wholeAt = now
	}
	for _, sum := range ch.Summaries {
		if sum.Busy && !sum.Ended {
			l.busy[sum.ID] = struct{}{}
		} else {
			delete(l.busy, sum.ID)
		}
	}
	l.cursor = ch.Cursor
	for id := range l.unadoptable {
		if _, ok := l.busy[id]; !ok {
			delete(l.unadoptable, id) // restored, deleted, or idle
		}
	}
	return err
}
