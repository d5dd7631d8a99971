package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// sweepEvery is how often the retention sweep runs: hourly, or every half
// Retain when that is shorter (a test's, a privacy policy's), at most once
// a minute, so a session outlives its Retain by at most that much. Each
// sweep lists every summary the store keeps.
func sweepEvery(retain time.Duration) time.Duration {
	return min(time.Hour, max(retain/2, time.Minute))
}

// sweepExpired deletes the sessions untouched for longer than Retain.
func (e *Engine) sweepExpired() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sums, err := e.opts.Store.Summaries(ctx, "")
	if err != nil {
		e.opts.Logger.Warn("retention: failed to list sessions", "err", err)
		return
	}
	n := 0
	var kept []Summary
	for _, sum := range sums {
		if !e.expired(sum.Updated) || e.inMemory(sum.ID) || !e.deleteUnowned(ctx, sum.ID, nil) {
			kept = append(kept, sum)
			continue
		}
		n++
	}
	if n > 0 {
		e.opts.Logger.Info("retention: deleted expired sessions", "sessions", n, "retain", e.opts.Retain)
	}
	lister, ok := e.opts.Store.(JournalList)
	if !ok {
		return
	}
	ids, err := lister.Journals(ctx) // after the summaries: see dropSummariesWithoutJournal
	if err != nil {
		e.opts.Logger.Warn("retention: failed to list the journals", "err", err)
		return
	}
	e.sweepUnsummarized(ctx, lister, ids, kept)
	e.dropSummariesWithoutJournal(ctx, lister, ids, kept)
}

// dropSummariesWithoutJournal deletes the summaries, read before the
// journals' list ids, whose journal is gone: a deletion a crash undid in
// part (a NATS server killed after it purged a chat brought the summary's
// earlier revisions back, not the journal: an outside audit's kill -9,
// every time), or a journal lost. Such a chat was listed with its title,
// and opened as unknown_session. The list is a hint only: each summary it
// leaves out is deleted under its lease once a read says its journal is
// gone.
func (e *Engine) dropSummariesWithoutJournal(ctx context.Context, lister JournalList, ids []string, sums []Summary) {
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	n := 0
	for _, sum := range sums {
		if have[sum.ID] || e.inMemory(sum.ID) {
			continue
		}
		// The list is but a hint (a long one comes in pages, which a
		// deletion meanwhile shifts): under the lease, a read of the
		// journal's end says it is gone before anything is deleted, and
		// the owner's list that the summary is still there. A chat deleted
		// since the summaries were read (by its browser, on any node) has
		// neither, and is no summary left behind by a crash.
		gone := func() bool {
			if _, err := lister.JournalUpdated(ctx, sum.ID); !errors.Is(err, ErrNoSession) {
				return false
			}
			still, err := e.opts.Store.Summaries(ctx, sum.Owner)
			return err == nil && slices.ContainsFunc(still, func(s Summary) bool { return s.ID == sum.ID })
		}
		if e.deleteUnowned(ctx, sum.ID, gone) {
			n++
		}
	}
	if n > 0 {
		e.opts.Logger.Info("deleted the summaries of sessions whose journal is gone (deleted before a crash, or lost)", "sessions", n)
	}
}

// sweepUnsummarized deletes the journals past Retain that no summary
// names, by when they were last appended to.
func (e *Engine) sweepUnsummarized(ctx context.Context, lister JournalList, ids []string, sums []Summary) {
	named := make(map[string]bool, len(sums))
	for _, sum := range sums {
		named[sum.ID] = true
	}
	n := 0
	for _, id := range ids {
		if named[id] || e.inMemory(id) {
			continue
		}
		updated, err := lister.JournalUpdated(ctx, id)
		if err != nil {
			if !errors.Is(err, ErrNoSession) {
				e.opts.Logger.Warn("retention: failed to read when a journal was written", "session", id, "err", err)
			}
			continue
		}
		if e.expired(updated) && e.deleteUnowned(ctx, id, nil) {
			n++
		}
	}
	if n > 0 {
		e.opts.Logger.Info("retention: deleted expired sessions that no summary named", "sessions", n, "retain", e.opts.Retain)
	}
}

// deleteUnowned deletes a session from the store (expired, or a summary
// without its journal) unless a node runs it (deleteUnderLease), and
// reports whether it did; a failure is logged, for a later sweep.
func (e *Engine) deleteUnowned(ctx context.Context, id string, still func() bool) bool {
	deleted, err := e.deleteUnderLease(ctx, id, still)
	if err != nil && !errors.Is(err, ErrOwnedElsewhere) {
		e.opts.Logger.Warn("retention: failed to delete a session; a later sweep tries again", "session", id, "err", err)
	}
	return deleted
}

// deleteUnderLease deletes session id from the store: on a store that
// nodes share (Owners), under the session's lease, which another node
// holds while the session is in its memory (ErrOwnedElsewhere: a page open
// on a chat untouched for longer than Retain); and, when still is given,
// only if it still says so once the lease is held (false, nil when not).
func (e *Engine) deleteUnderLease(ctx context.Context, id string, still func() bool) (bool, error) {
	if owners, ok := e.opts.Store.(Owners); ok {
		own, err := owners.Own(ctx, id, func() {})
		if err != nil {
			return false, err
		}
		defer func() {
			if err := own.Release(context.WithoutCancel(ctx)); err != nil {
				e.opts.Logger.Warn("failed to give a deleted session's lease back; it expires by itself", "session", id, "err", err)
			}
		}()
	}
	if still != nil && !still() {
		return false, nil
	}
	if err := e.opts.Store.Delete(ctx, id); err != nil {
		return false, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return true, nil
}
