package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReasonDeleted is session.ended's reason for a session Delete took away.
const ReasonDeleted = "deleted"

// Delete deletes owner's session id: its journal and its summary, so that
// nothing of it is listed, opened or read again. A session in memory here
// ends first, as End ends it (its open calls cancelled, the worker's
// session.end, session.ended with reason "deleted" to its pages), and is
// deleted as it leaves, under its lease, after its last step is stored;
// one that is not in memory is deleted under its lease, taken for the
// time of the deletion, while loads of it wait and then find nothing.
//
// ErrNoSession when owner has no session of that id (another owner's is
// refused alike, so a caller cannot learn which); an *OwnedElsewhereError
// (errors.Is ErrOwnedElsewhere) when another node runs it: that node's
// Delete deletes it. A store that fails leaves the session ended, not
// deleted: Delete may be called again.
func (e *Engine) Delete(ctx context.Context, id, owner string) error {
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
			// Loads of it wait for the deletion, then look again.
			lc = &loadCall{done: make(chan struct{}), deleting: true}
			e.loading[id] = lc
			e.mu.Unlock()
			err := e.deleteStored(ctx, id, owner)
			e.loaded(id, lc)
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
		if s.owner != owner {
			return fmt.Errorf("%w: session %s is not this owner's", ErrNoSession, id)
		}
		err := s.do(ctx, func() error {
			s.purge = true
			s.end(ReasonDeleted)
			return nil
		})
		if err != nil && !errors.Is(err, ErrSessionClosed) && !errors.Is(err, ErrUnloaded) {
			return err
		}
		select {
		case <-s.stopped:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err != nil {
			continue // it was leaving memory already: deleted from the store now
		}
		return s.purged
	}
}

// deleteStored deletes session id, not in memory here, from the store,
// when owner's list of sessions names it.
func (e *Engine) deleteStored(ctx context.Context, id, owner string) error {
	switch listed, err := e.listedFor(ctx, id, owner); {
	case err != nil:
		return fmt.Errorf("%w: the list of sessions: %w", ErrStoreUnavailable, err)
	case !listed:
		return fmt.Errorf("%w: no session %s of this owner's", ErrNoSession, id)
	}
	if owners, ok := e.opts.Store.(Owners); ok {
		own, err := owners.Own(ctx, id, func() {})
		if err != nil {
			return err
		}
		defer func() {
			if err := own.Release(context.WithoutCancel(ctx)); err != nil {
				e.opts.Logger.Warn("failed to give a deleted session's lease back; it expires by itself", "session", id, "err", err)
			}
		}()
	}
	if err := e.opts.Store.Delete(ctx, id); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	e.opts.Logger.Info("session deleted", "session", id)
	return nil
}

// purgeTimeout bounds the deletion of a session from the store as it
// leaves memory (Delete).
const purgeTimeout = 30 * time.Second

// purgeStored deletes the session from the store as it leaves memory,
// under its lease, after its last step is stored: Delete asked it to.
func (s *Session) purgeStored() {
	if s.lost.Load() {
		s.purged = fmt.Errorf("%w: session %s lost its lease as it was deleted", ErrOwnedElsewhere, s.id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), purgeTimeout)
	defer cancel()
	if err := s.e.opts.Store.Delete(ctx, s.id); err != nil {
		s.purged = fmt.Errorf("%w: the session ended, and is not deleted: %w", ErrStoreUnavailable, err)
		s.logger.Warn("failed to delete the session; it ended, and is deleted when asked again", "err", err)
		return
	}
	s.logger.Info("session deleted")
}
