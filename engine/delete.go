package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReasonDeleted is session.end's and session.ended's reason for a session
// Delete took away.
const ReasonDeleted = "deleted"

// Delete deletes owner's session id: its journal and its summary, so that
// nothing of it is listed, opened or read again. A session in memory here
// ends first (its open calls cancelled, session.ended with reason
// "deleted" to its pages) and is deleted as it leaves, under its lease,
// after its last step is stored; one that is not in memory (unloaded, or
// ended) is deleted under its lease, taken for the time of the deletion,
// while loads of it here wait and then find nothing. Either way, once it
// is gone the worker gets session.end with reason "deleted" (on a runner:
// one it told of an earlier end is told again).
//
// ErrNoSession when owner has no session of that id (another owner's is
// refused alike, so a caller cannot learn which); an *OwnedElsewhereError
// (errors.Is ErrOwnedElsewhere) when another node runs it: that node's
// Delete deletes it; ErrStoreUnavailable when the store fails: a session
// whose steps wait for the store is refused as it is, and one whose purge
// failed left memory ended, or as it was when the store refused its end
// too, for Delete to be called again. The worker is told nothing then.
func (e *Engine) Delete(ctx context.Context, id, owner string) error {
	return e.delete(ctx, id, owner, false)
}

// DeleteUnlisted deletes session id, which no list of sessions names (its
// summary was lost: a crash, a failed write, a backup taken as it was
// deleted), for an operator: as its owner's Delete does when it is in
// memory; else its journal, under its lease, while loads of it wait.
// ErrNoSession when it has no journal either. The worker is told when the
// session was in memory (its owner known).
func (e *Engine) DeleteUnlisted(ctx context.Context, id string) error {
	return e.delete(ctx, id, "", true)
}

// delete is Delete, of a session no list names when unlisted.
func (e *Engine) delete(ctx context.Context, id, owner string, unlisted bool) error {
	if err := CheckID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSession, err)
	}
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return ErrSessionClosed
		}
		s, lc := e.sessions[id], e.loading[id]
		if s == nil && lc == nil {
			// Loads of it wait for the deletion, then look again; Close
			// waits for it.
			lc = &loadCall{done: make(chan struct{}), deleting: true}
			e.loading[id] = lc
			e.wg.Add(1)
			e.mu.Unlock()
			err := e.deleteStored(ctx, id, owner, unlisted)
			e.loaded(id, lc)
			e.wg.Done()
			return err
		}
		e.mu.Unlock()
		if lc != nil {
			// Being opened or loaded (or deleted): once it is, look again.
			select {
			case <-lc.done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if unlisted {
			owner = s.owner // loaded meanwhile: its owner's, as Delete
		}
		if s.owner != owner {
			return fmt.Errorf("%w: session %s is not this owner's", ErrNoSession, id)
		}
		var purged chan struct{}
		err := s.do(ctx, func() error {
			if err := s.log.failing(); err != nil {
				// Its end would not be stored either: the session would be
				// loaded again as it was, its worker told it was deleted.
				return fmt.Errorf("%w: the session's last steps wait for the store, and it is not deleted: %w", ErrStoreUnavailable, err)
			}
			purged = make(chan struct{})
			s.purging = purged
			s.end(ReasonDeleted)
			return nil
		})
		switch {
		case errors.Is(err, ErrSessionClosed) || errors.Is(err, ErrUnloaded):
			// Leaving memory already: deleted from the store once gone.
			select {
			case <-s.stopped:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case err != nil:
			return err
		}
		// Answered once the purge is done, not once the session's model
		// turn and worker attempts have returned: they write nothing more.
		select {
		case <-purged:
			return s.purged
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// deleteStored deletes session id, not in memory here, from the store,
// when owner's list of sessions names it, and then tells the worker; or,
// unlisted, when it has a journal (no owner to tell).
func (e *Engine) deleteStored(ctx context.Context, id, owner string, unlisted bool) error {
	if unlisted {
		return e.deleteUnlistedJournal(ctx, id)
	}
	switch listed, err := e.listedFor(ctx, id, owner); {
	case err != nil:
		return fmt.Errorf("%w: the list of sessions: %w", ErrStoreUnavailable, err)
	case !listed:
		return fmt.Errorf("%w: no session %s of this owner's", ErrNoSession, id)
	}
	if _, err := e.deleteUnderLease(ctx, id, nil); err != nil {
		return err
	}
	e.opts.Logger.Info("session deleted", "session", id)
	e.tellDeleted(id, owner)
	return nil
}

// deleteUnlistedJournal deletes the journal of session id, which no list
// names, once its lease is held and it still has one.
func (e *Engine) deleteUnlistedJournal(ctx context.Context, id string) error {
	lister, ok := e.opts.Store.(JournalList)
	if !ok {
		return fmt.Errorf("%w: no list names session %s, and this store lists no journals", ErrNoSession, id)
	}
	var readErr error
	has := func() bool {
		_, readErr = lister.JournalUpdated(ctx, id)
		return readErr == nil
	}
	if !has() {
		if errors.Is(readErr, ErrNoSession) {
			return fmt.Errorf("%w: session %s has neither a summary nor a journal", ErrNoSession, id)
		}
		return fmt.Errorf("%w: its journal: %w", ErrStoreUnavailable, readErr)
	}
	deleted, err := e.deleteUnderLease(ctx, id, has)
	switch {
	case err != nil:
		return err
	case !deleted && errors.Is(readErr, ErrNoSession):
		return fmt.Errorf("%w: session %s has neither a summary nor a journal", ErrNoSession, id)
	case !deleted:
		return fmt.Errorf("%w: its journal: %w", ErrStoreUnavailable, readErr)
	}
	e.opts.Logger.Info("session deleted, which no list named", "session", id)
	return nil
}

// tellDeleted gives the worker session.end with reason "deleted" for a
// session that is gone from the store, so that it deletes what it keeps of
// it too; on a runner, which Close waits for, within DecideTimeout. What
// it decides is not read: the session is gone.
func (e *Engine) tellDeleted(id, owner string) {
	e.runners.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.opts.DecideTimeout)
		defer cancel()
		req := DecideRequest{Session: id, Owner: owner, Trigger: SessionEnd{Reason: ReasonDeleted}}
		if _, err := decideSafely(ctx, e.opts.Worker, req, e.opts.Logger.With("session", id)); err != nil {
			e.opts.Logger.Warn("the worker failed on the session.end of a deleted session", "session", id, "err", err)
		}
	})
}

// purgeTimeout bounds the deletion of a session from the store as it
// leaves memory (Delete).
const purgeTimeout = 30 * time.Second

// purgeStored deletes the session from the store as it leaves memory,
// under its lease, after its last step is stored: Delete asked it to.
func (s *Session) purgeStored() {
	if s.lost.Load() {
		// Another node may run it now, from its journal: a purge by a node
		// without the lease would race its load. Its Delete deletes it.
		s.purged = fmt.Errorf("%w: session %s lost its lease as it was deleted", ErrOwnedElsewhere, s.id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), purgeTimeout)
	defer cancel()
	if err := s.e.opts.Store.Delete(ctx, s.id); err != nil {
		// Its end may not be stored either (the store refused its last
		// steps): it is loaded again ended, or as it was, or not at all
		// (a deletion cut short part way: Store.Delete).
		s.purged = fmt.Errorf("%w: the session left memory, and is not deleted: %w", ErrStoreUnavailable, err)
		s.logger.Warn("failed to delete the session; it is deleted when asked again", "err", err)
		return
	}
	s.logger.Info("session deleted")
	s.e.tellDeleted(s.id, s.owner)
}
