package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	_ engine.Owners      = (*Store)(nil)
	_ engine.LeaseReader = (*Store)(nil)
	_ engine.WriteProber = (*Store)(nil)
)

// ProbeWrite implements engine.WriteProber: it writes the key
// node.<node> of the leases' bucket, which names no session (a session's
// id has no dot) and expires as a lease does. It is the write a new
// session's lease needs: a cluster that refuses it opens no session.
func (s *Store) ProbeWrite(ctx context.Context) error {
	subj := ownersSubject + "node." + s.opts.Node
	if err := s.put(ctx, subj, []byte(s.opts.Node)); err != nil {
		return fmt.Errorf("failed to write this node's key in the leases' bucket (%s): %w", subj, err)
	}
	return nil
}

// ownership is a session's lease held by this node: a key of the owners
// bucket whose value is the node, rewritten every third of the lease's time
// to live. validUntil is when the lease may have expired for the other
// nodes, less a margin for clocks and delays: past it, this node appends
// nothing more to the session.
type ownership struct {
	s       *Store
	session string
	lost    func()

	mu         sync.Mutex
	rev        uint64
	validUntil time.Time
	expiredBy  time.Time     // past it the lease has expired on the server for sure, unrenewed
	gone       bool          // released or lost
	renewing   chan struct{} // closed when the renewal in flight is done; nil: none
}

// Own implements engine.Owners.
func (s *Store) Own(ctx context.Context, session string, lost func()) (engine.Ownership, error) {
	if !validID(session) {
		return nil, fmt.Errorf("session id %q cannot name a lease", session)
	}
	start := s.opts.Clock.Now()
	node := []byte(s.opts.Node)
	rev, err := s.owners.Create(ctx, session, node)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := s.owners.Get(ctx, session)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
			rev, err = s.owners.Create(ctx, session, node) // it expired meanwhile
		case gerr != nil:
			return nil, fmt.Errorf("%w: failed to read session %s's lease: %w", engine.ErrStoreUnavailable, session, gerr)
		case string(e.Value()) == s.opts.Node:
			rev, err = s.owners.Update(ctx, session, node, e.Revision()) // ours already
		default:
			return nil, &engine.OwnedElsewhereError{Session: session, Node: string(e.Value())}
		}
	}
	if err != nil {
		// The key changed between the read and the write: a create
		// refused (ErrKeyExists), or an update of this node's own lease
		// refused for its revision, which a replicated stream says with
		// a code ErrKeyExists does not match (wrongLast).
		if errors.Is(err, jetstream.ErrKeyExists) || wrongLast(err) {
			return nil, fmt.Errorf("%w: session %s was taken meanwhile", engine.ErrOwnedElsewhere, session)
		}
		// The store's trouble (no quorum, NATS away): a page is told
		// store_unavailable, and tries again.
		return nil, fmt.Errorf("%w: failed to take session %s's lease: %w", engine.ErrStoreUnavailable, session, err)
	}
	// Another node may have appended since this one last did: read the
	// journal's end again.
	s.forgetHead(session)
	o := &ownership{s: s, session: session, lost: lost, rev: rev, validUntil: s.validFrom(start), expiredBy: s.expiredBy(s.opts.Clock.Now())}
	s.mu.Lock()
	s.owned[session] = o
	s.mu.Unlock()
	return o, nil
}

// HeldElsewhere implements engine.LeaseReader: one read of the lease.
func (s *Store) HeldElsewhere(ctx context.Context, session string) (string, error) {
	if !validID(session) {
		return "", fmt.Errorf("session id %q cannot name a lease", session)
	}
	e, err := s.owners.Get(ctx, session)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		return "", nil // none, or given back, or expired
	case err != nil:
		return "", fmt.Errorf("failed to read session %s's lease: %w", session, err)
	}
	if node := string(e.Value()); node != s.opts.Node {
		return node, nil
	}
	return "", nil
}

// validFrom is when a lease written at start stops being safe to use.
func (s *Store) validFrom(start time.Time) time.Time {
	return start.Add(s.opts.LeaseTTL - s.leaseMargin())
}

// expiredBy is when a lease whose write was acknowledged at acked has
// expired on the server for sure, unrenewed: another node may take it from
// then on.
func (s *Store) expiredBy(acked time.Time) time.Time {
	return acked.Add(s.opts.LeaseTTL + s.leaseMargin())
}

// leaseMargin is what validFrom and expiredBy allow for clocks and delays.
func (s *Store) leaseMargin() time.Duration {
	return max(s.opts.LeaseTTL/5, 100*time.Millisecond)
}

// holds is nil when this node may append to session: it holds its lease, in
// time, or it never took one for it here (a store used without leases). A
// lease lost, or expired unrenewed, stays refused until Own takes it again
// (ErrFenced). A lease past its time whose renewal has not answered yet
// (NATS away, the process paused), and that may not have expired, is
// refused too, but not lost: the step waits, as for a store that fails,
// until the renewal says whether the lease is still this node's.
func (s *Store) holds(session string) error {
	s.mu.Lock()
	o := s.owned[session]
	s.mu.Unlock()
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch now := s.opts.Clock.Now(); {
	case o.gone:
		return fmt.Errorf("%w: this node's lease on session %s was lost", ErrFenced, session)
	case now.After(o.expiredBy) && s.embedded == nil: // the embedded server's are never lost by time (renew)
		return fmt.Errorf("%w: this node's lease on session %s expired unrenewed", ErrFenced, session)
	case now.After(o.validUntil):
		return fmt.Errorf("this node's lease on session %s is past its time and its renewal has not answered yet: the step waits for it", session)
	}
	return nil
}

// Release implements engine.Ownership.
func (o *ownership) Release(ctx context.Context) error {
	o.mu.Lock()
	gone, renewing := o.gone, o.renewing
	o.gone = true
	o.mu.Unlock()
	o.s.forgetOwned(o)
	if gone {
		return nil
	}
	if renewing != nil {
		// The lease is being rewritten: delete the revision that writes,
		// not the one before it (which would leave the lease to expire).
		select {
		case <-renewing:
		case <-ctx.Done():
			return fmt.Errorf("failed to give session %s's lease back: %w", o.session, ctx.Err())
		}
	}
	o.mu.Lock()
	rev := o.rev
	o.mu.Unlock()
	err := o.s.owners.Delete(ctx, o.session, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("failed to give session %s's lease back: %w", o.session, err)
	}
	return nil
}

// forgetOwned forgets o's session, and where its journal ends: the next
// Own reads that again (another node may append meanwhile), so keeping it
// would only hold memory for every session this node ever ran.
func (s *Store) forgetOwned(o *ownership) {
	s.mu.Lock()
	if s.owned[o.session] == o {
		delete(s.owned, o.session)
		delete(s.heads, o.session)
		delete(s.splits, o.session)
		delete(s.behind, o.session)
	}
	s.mu.Unlock()
}

// ownersSubject is the subjects' prefix of the leases' bucket (no mirror,
// no domain): a key's Update publishes on it.
const ownersSubject = "$KV." + OwnersBucket + "."

// renew rewrites every held lease each third of the time to live, until
// Close. A lease it cannot rewrite in time is lost.
func (s *Store) renew() {
	defer s.background.Done()
	t := time.NewTicker(s.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		held := make([]*ownership, 0, len(s.owned))
		for _, o := range s.owned {
			held = append(held, o)
		}
		s.mu.Unlock()
		// Concurrently, a few at a time: one round trip each, and a node
		// may hold thousands.
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
		for _, o := range held {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				o.renew()
			}()
		}
		wg.Wait()
	}
}

func (o *ownership) renew() {
	o.mu.Lock()
	if o.gone {
		o.mu.Unlock()
		return
	}
	rev, expiredBy := o.rev, o.expiredBy
	done := make(chan struct{})
	o.renewing = done
	o.mu.Unlock()
	defer close(done)
	// A renewal past validUntil (NATS away, the process paused) is tried
	// all the same, until the lease has expired for sure: it is fenced by
	// the lease's revision, which any other node's lease on the session
	// would have changed (a lease is taken only once the key is gone), so
	// one that succeeds shows the lease stayed this node's throughout;
	// holds refused every append meanwhile.
	start := o.s.opts.Clock.Now()
	// On the embedded server the data directory's lock keeps every other
	// process out: no other node can take the lease, so time alone does
	// not lose it. A store that stored nothing for longer than a lease (a
	// full disk, a disk remounted read-only) must not end the sessions it
	// keeps waiting.
	alone := o.s.embedded != nil
	lost := start.After(expiredBy) && !alone
	var newRev uint64
	var err error
	if lost {
		err = errors.New("no renewal was acknowledged within the lease's time to live")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), o.s.opts.LeaseTTL/3)
		// The bucket's Update, as Summarize writes a summary: a
		// publish on the key's subject, fenced by its revision.
		newRev, err = o.s.publish(ctx, ownersSubject+o.session, []byte(o.s.opts.Node), rev)
		unsure := false
		if wrongLast(err) {
			// A renewal given up on (a timeout while NATS was away) may
			// have landed once NATS was back: the lease is still this
			// node's, at a later revision. From that one, renew again.
			m, gerr := o.s.ownersStream.GetLastMsgForSubject(ctx, ownersSubject+o.session)
			switch {
			case gerr == nil && string(m.Data) == o.s.opts.Node && m.Sequence > rev:
				start = o.s.opts.Clock.Now()
				newRev, err = o.s.publish(ctx, ownersSubject+o.session, []byte(o.s.opts.Node), m.Sequence)
			case errors.Is(gerr, jetstream.ErrMsgNotFound) && !alone:
				// Expired, with no marker of a lease given back or taken
				// away (the bucket's Get tells neither from none):
				// renewals that did not land within the lease's time, as
				// while the bucket elected a leader (its max_age ran on
				// meanwhile). Taken again, it stays this node's: a node
				// that took it meanwhile and holds it makes the write
				// fail; one that took it, wrote to the session's
				// journal, and lost it in turn, fences this node's next
				// append, which expects the journal to end where this
				// node left it. The write is fenced on the key having no
				// message at all (a create would write over a marker, and
				// undo a ForceRelease that landed since the read). Should
				// it fail, the key has a message now: a marker, another
				// node's lease, or this node's at a later revision (a
				// replica behind answered the read): the next tick tells.
				start = o.s.opts.Clock.Now()
				if r, perr := o.s.publish(ctx, ownersSubject+o.session, []byte(o.s.opts.Node), 0); perr == nil {
					newRev, err = r, nil
				} else {
					unsure = true
				}
			case gerr == nil && string(m.Data) != o.s.opts.Node,
				errors.Is(gerr, jetstream.ErrMsgNotFound):
				// Another node's, given back or taken away (a delete or
				// purge marker, ForceRelease's: a marker has no value, and
				// no node is named ""), or gone (on the embedded server,
				// taken again below): lost.
			default:
				// Unread (a cluster without its quorum), or this node's
				// at no later revision (a replica behind its leader):
				// nobody else can have taken it before it expired, so it
				// is tried again at the next tick, until expiredBy.
				unsure = true
			}
		}
		if alone && wrongLast(err) {
			// The key expired while the store stored nothing: nobody else
			// could take it, so it is this node's to take again.
			if r, cerr := o.s.owners.Create(ctx, o.session, []byte(o.s.opts.Node)); cerr == nil {
				start, newRev, err = o.s.opts.Clock.Now(), r, nil
			}
		}
		cancel()
		// Refused: the lease is another node's, or gone. Unanswered (NATS
		// away): try again at the next tick, until expiredBy.
		lost = (wrongLast(err) && !unsure) || errors.Is(err, jetstream.ErrKeyNotFound)
	}
	o.mu.Lock()
	o.renewing = nil
	if o.gone {
		if err == nil && !lost {
			o.rev = newRev // for a Release waiting to delete it
		}
		o.mu.Unlock()
		return
	}
	switch {
	case lost:
		o.gone = true
	case err == nil:
		o.rev, o.validUntil, o.expiredBy = newRev, o.s.validFrom(start), o.s.expiredBy(o.s.opts.Clock.Now())
	}
	o.mu.Unlock()
	if lost {
		// It stays in owned, gone: this node appends nothing more to the
		// session until it takes the lease again.
		o.s.opts.Logger.Warn("lost a session's lease", "session", o.session, "err", err)
		o.lost()
	}
}

// ForceRelease deletes session's lease whoever holds it: the holder finds
// out at its next renewal and stops (on the embedded server, where no
// other process can hold it, the holder takes it again). For an operator
// who knows the holder is gone, and for tests.
func (s *Store) ForceRelease(ctx context.Context, session string) error {
	if err := s.owners.Purge(ctx, session); err != nil {
		return fmt.Errorf("failed to delete session %s's lease: %w", session, err)
	}
	return nil
}

// LeaseTTL is how long a session's lease lasts unrenewed: Options.LeaseTTL,
// or the leases' bucket's own when it was made with another (every node
// uses the bucket's).
func (s *Store) LeaseTTL() time.Duration {
	return s.opts.LeaseTTL
}
