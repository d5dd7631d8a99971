package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrOwnedElsewhere: another node runs the session now (it holds the
// session's lease). The error is an *OwnedElsewhereError, which names it.
var ErrOwnedElsewhere = errors.New("another gateway node runs this session")

// OwnedElsewhereError says which node runs a session.
type OwnedElsewhereError struct {
	Session, Node string
}

func (e *OwnedElsewhereError) Error() string {
	return fmt.Sprintf("%v: session %s runs on node %s", ErrOwnedElsewhere, e.Session, e.Node)
}

// Is makes errors.Is(err, ErrOwnedElsewhere) hold.
func (e *OwnedElsewhereError) Is(target error) bool { return target == ErrOwnedElsewhere }

// Owners is what a Store shared by several gateway nodes offers: a lease per
// session, so that one node at a time runs it. The engine takes the lease
// before it opens or loads a session and gives it back when the session
// leaves memory. A Store that is not shared (MemoryStore) does not
// implement it.
type Owners interface {
	// Own takes session's lease for this node and keeps renewing it. It
	// fails with an error wrapping ErrOwnedElsewhere while another node
	// holds it. lost is called, once, from the store's goroutine, when the
	// lease could not be renewed in time (a partition, a paused process):
	// another node may run the session from then on, and this node's
	// appends to it are refused.
	Own(ctx context.Context, session string, lost func()) (Ownership, error)
}

// LeaseReader is what Owners that can read a lease without taking it
// offer. The look for sessions no node runs (Options.Adopt) asks it first
// of each busy session: one request, where trying to take the lease of a
// session another node runs costs two (a create refused, then a read of
// who holds it), every look, on every node.
type LeaseReader interface {
	// HeldElsewhere returns the node, other than this one, that holds
	// session's lease: "" when none does, or this one.
	HeldElsewhere(ctx context.Context, session string) (node string, err error)
}

// WriteProber is a shared Store that can say whether it takes writes now,
// with a write of its own that no session reads. A NATS cluster without
// its quorum still answers reads, from a replica, and refuses every write:
// the look for sessions no node runs (every Options.Adopt), which only
// reads, asks it too, so that a node with no session of its own to write
// says the store is down while a new session could not be opened on it.
type WriteProber interface {
	ProbeWrite(ctx context.Context) error
}

// ErrNoLeases: the store keeps no leases it can read (it is not shared,
// or not a LeaseReader), so it cannot say which node runs a session.
var ErrNoLeases = errors.New("the store cannot say which node runs a session")

// RunsElsewhere returns the node, other than this one, that runs session
// now (it holds its lease): "" when none does, or this one does.
// ErrNoLeases when the store cannot say. One read of the store.
func (e *Engine) RunsElsewhere(ctx context.Context, session string) (string, error) {
	r, ok := e.opts.Store.(LeaseReader)
	if !ok {
		return "", ErrNoLeases
	}
	return r.HeldElsewhere(ctx, session)
}

// Ownership is a held lease.
type Ownership interface {
	// Release gives the lease back, so another node may run the session
	// at once instead of after its time to live.
	Release(ctx context.Context) error
}

// own takes the session's lease when the store is shared; it returns nil
// for a store that is not.
func (e *Engine) own(ctx context.Context, s *Session) (Ownership, error) {
	owners, ok := e.opts.Store.(Owners)
	if !ok {
		return nil, nil
	}
	return owners.Own(ctx, s.id, func() {
		// On a runner, not the store's goroutine: a full inbox would hold
		// up every renewal on the node until this session took a message.
		// The post ends once taken, or with the session.
		s.e.runners.Go(func() {
			_ = s.post(context.Background(), func() {
				s.leaseLost("lost the session's lease: another node may run it; unloading")
			})
		})
	})
}

// leaseLost leaves memory at once: another node may run the session now,
// from the journal; what this node has not stored is not its to store, and
// work its steps started and that has not begun asks no one (leaseGone).
// why and args are the log line's.
func (s *Session) leaseLost(why string, args ...any) {
	s.logger.Warn(why, append(args, "pending", s.log.failing() != nil)...)
	s.lost.Store(true)
	s.unloading = true
}

// leaseGone is ErrFenced once the session's lease is lost: a model turn or
// worker attempt that a step started (goAfterCommit) checks it before it
// asks the model or the worker, on its own goroutine.
func (s *Session) leaseGone() error {
	if s.top().lost.Load() {
		return ErrFenced
	}
	return nil
}
