package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkRenew rewrites one held lease, as the renewer does every third
// of the lease's time to live for every session this node runs.
func BenchmarkRenew(b *testing.B) {
	// Errors only: a new data directory's warning buried the result.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := Open(context.Background(), Options{DataDir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Own(context.Background(), "s1", func() { b.Error("lost the lease") }); err != nil {
		b.Fatal(err)
	}
	s.mu.Lock()
	o := s.owned["s1"]
	s.mu.Unlock()
	b.ReportAllocs()
	for b.Loop() {
		o.renew()
	}
	if o.gone {
		b.Fatal("the lease was lost")
	}
}

// TestRenewAfterARenewalThatLandedLate: a renewal given up on while NATS
// was away lands once it is back, so the lease's revision is past the one
// this node knows. The next renewal finds the lease still this node's and
// goes on from there, where it lost the lease, and its sessions with it,
// in an outage shorter than the lease. Another node's lease at that place
// is still lost.
func TestRenewAfterARenewalThatLandedLate(t *testing.T) {
	for _, tc := range []struct {
		writer string
		lost   bool
	}{{"n1", false}, {"n2", true}} {
		t.Run("landed by "+tc.writer, func(t *testing.T) {
			ctx := context.Background()
			s, o, losses := holding(t, Options{DataDir: t.TempDir(), Node: "n1"})
			landed, err := s.publish(ctx, ownersSubject+"s1", []byte(tc.writer), o.rev)
			if err != nil {
				t.Fatal(err)
			}
			o.renew()
			if lost := *losses > 0; lost != tc.lost || o.gone != tc.lost {
				t.Fatalf("after a renewal by %s landed late: lost %v (gone %v), want %v", tc.writer, *losses > 0, o.gone, tc.lost)
			}
			if !tc.lost && o.rev <= landed {
				t.Errorf("the lease's revision %d, want past the one that landed (%d)", o.rev, landed)
			}
		})
	}
}

// TestLateRenewalKeepsTheLease: a lease whose renewals went unanswered past
// its time (NATS away for a few seconds, shorter than the lease) refuses
// appends meanwhile, as a failing store does, and is not lost: the next
// renewal, fenced by the lease's revision, shows nobody took it. It was
// given up at once, and the node's sessions with it. One past the time the
// lease has certainly expired is lost without asking.
func TestLateRenewalKeepsTheLease(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	s, o, lost := holding(t, Options{DataDir: t.TempDir(), Node: "n1", Clock: clk})
	// Its renewals did not answer in time: past the lease's safe time
	// (10 s less a fifth), not past its certain expiry (10 s and a fifth).
	clk.Advance(9 * time.Second)
	if err := s.holds("s1"); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("an append past the lease's time, its renewal unanswered: %v, want refused, not fenced", err)
	}
	o.renew()
	if *lost != 0 || s.holds("s1") != nil {
		t.Fatalf("after a late renewal that went through: lost %d times, holds %v; want the lease kept", *lost, s.holds("s1"))
	}

	// Nothing acknowledged for longer than the lease lives. On a NATS that
	// nodes share the lease is lost then (TestOwnership); on the embedded
	// server no other process can take it, so the step waits, and the next
	// renewal that goes through keeps it.
	clk.Advance(13 * time.Second)
	if err := s.holds("s1"); err == nil || errors.Is(err, ErrFenced) {
		t.Errorf("an append past the lease's certain expiry, on the embedded server: %v, want refused, not fenced", err)
	}
	o.renew()
	if *lost != 0 || s.holds("s1") != nil {
		t.Errorf("a renewal past the lease's certain expiry, on the embedded server: lost %d times, holds %v; want the lease kept", *lost, s.holds("s1"))
	}

	// The key itself expired meanwhile (the bucket's time to live passed
	// while the store stored nothing): the node takes it again.
	if err := s.owners.Purge(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	o.renew()
	if *lost != 0 || s.holds("s1") != nil {
		t.Errorf("a renewal after the lease's key expired, on the embedded server: lost %d times, holds %v; want it taken again", lost, s.holds("s1"))
	}
	if e, err := s.owners.Get(ctx, "s1"); err != nil || string(e.Value()) != "n1" {
		t.Errorf("the lease's key after: %v, %v; want it n1's", e, err)
	}
}

// unreadableLeases is the leases' stream, whose reads go unanswered, as a
// cluster's without its quorum may.
type unreadableLeases struct{ jetstream.Stream }

func (unreadableLeases) GetLastMsgForSubject(context.Context, string) (*jetstream.RawStreamMsg, error) {
	return nil, errors.New("nats: timeout")
}

// TestRenewThatCannotTellWhoseTheLeaseIs: a renewal refused for its
// revision whose read of the lease goes unanswered (a cluster without its
// quorum) cannot tell a renewal of its own that landed late from another
// node's lease. Nobody can have taken the lease before it expired, so it
// is not lost: the next renewal, with the read answered, goes on from the
// revision that landed. It was lost at once, halfway through the lease.
func TestRenewThatCannotTellWhoseTheLeaseIs(t *testing.T) {
	ctx := context.Background()
	s, o, losses := holding(t, Options{URL: natstest.Server(t, nil), Node: "n1", LeaseTTL: time.Minute})
	landed, err := s.publish(ctx, ownersSubject+"s1", []byte("n1"), o.rev)
	if err != nil {
		t.Fatal(err)
	}
	leases := s.ownersStream
	s.ownersStream = unreadableLeases{leases}
	o.renew()
	if *losses > 0 || o.gone {
		t.Fatalf("a renewal that could not read the lease lost it (gone %v)", o.gone)
	}
	s.ownersStream = leases
	o.renew()
	if *losses > 0 || o.gone || o.rev <= landed {
		t.Errorf("the next renewal: lost %v (gone %v), revision %d; want the lease kept, past %d", *losses > 0, o.gone, o.rev, landed)
	}
}

// racedKV is a bucket in which this node's own lease changes between its
// read and its update, as a replicated stream says it: code 10164.
type racedKV struct{ jetstream.KeyValue }

type ownEntry struct{ jetstream.KeyValueEntry }

func (ownEntry) Value() []byte    { return []byte("n1") }
func (ownEntry) Revision() uint64 { return 7 }

func (racedKV) Create(context.Context, string, []byte, ...jetstream.KVCreateOpt) (uint64, error) {
	return 0, jetstream.ErrKeyExists
}
func (racedKV) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return ownEntry{}, nil
}
func (racedKV) Update(context.Context, string, []byte, uint64) (uint64, error) {
	return 0, fmt.Errorf("%w: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}, jetstream.ErrKeyRevisionMismatch)
}

// TestOwnRacedOnAReplicatedStream: a lease that changed between Own's read
// and its write is another node's meanwhile, whichever code the stream
// refuses the write with: a replicated one's (10164) is not
// ErrKeyExists, and a page was told the store was down.
func TestOwnRacedOnAReplicatedStream(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: natstest.Server(t, nil), Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.owners = racedKV{s.owners}
	if _, err := s.Own(ctx, "s1", func() {}); !errors.Is(err, engine.ErrOwnedElsewhere) || errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Own raced on a replicated stream: %v, want ErrOwnedElsewhere", err)
	}
}

// holding opens a store with opts, takes session s1's lease, and returns
// the store, its lease, and how many times the lease was said lost.
func holding(t *testing.T, opts Options) (*Store, *ownership, *int) {
	t.Helper()
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	losses := new(int)
	if _, err := s.Own(context.Background(), "s1", func() { *losses++ }); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s, s.owned["s1"], losses
}

// TestRenewTakesAnExpiredLeaseAgain: on a NATS that nodes share, a lease
// whose key expired (its renewals did not land within its time, as while
// the leases' bucket elects a leader, its max_age running on) and that no
// node took is this node's to take again. It was lost, and every node's
// sessions with it, when one NATS server of three died (an outside audit,
// with 5 s leases). A lease given back or taken away leaves a marker, and
// is lost; a node that took it, wrote to the journal and let it expire in
// turn, leaves this node's next append fenced.
func TestRenewTakesAnExpiredLeaseAgain(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		meanwhile func(t *testing.T, s *Store)
		lost      bool
		fenced    bool
	}{
		{name: "expired", meanwhile: expire},
		{name: "taken away", lost: true, meanwhile: func(t *testing.T, s *Store) {
			if err := s.ForceRelease(ctx, "s1"); err != nil { // a purge marker
				t.Fatal(err)
			}
		}},
		{name: "given back", lost: true, meanwhile: func(t *testing.T, s *Store) {
			if err := s.owners.Delete(ctx, "s1"); err != nil { // Release's delete marker
				t.Fatal(err)
			}
		}},
		{name: "taken, written to and expired", fenced: true, meanwhile: func(t *testing.T, s *Store) {
			expire(t, s)
			other, err := Open(ctx, Options{URL: s.opts.URL, Node: "n2"})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.Own(ctx, "s1", func() {}); err != nil {
				t.Fatal(err)
			}
			if err := other.Append(ctx, "s1", engine.Batch{Events: []engine.Event{{Seq: 2, Type: "message",
				Frame: []byte(`{"type":"message","seq":2,"message":{"role":"user","content":"n2's"}}`)}}}); err != nil {
				t.Fatal(err)
			}
			expire(t, other)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, o, losses := holding(t, Options{URL: natstest.Server(t, nil), Node: "n1", LeaseTTL: time.Minute})
			if err := s.Append(ctx, "s1", message(1)); err != nil {
				t.Fatal(err)
			}
			tc.meanwhile(t, s)
			o.renew()
			if lost := *losses > 0; lost != tc.lost || o.gone != tc.lost {
				t.Fatalf("lost %v (gone %v), want %v", lost, o.gone, tc.lost)
			}
			if tc.lost {
				return
			}
			if e, err := s.owners.Get(ctx, "s1"); err != nil || string(e.Value()) != "n1" || e.Revision() != o.rev {
				t.Fatalf("the lease after the renewal: %v, %v; want n1's, at revision %d", e, err, o.rev)
			}
			err := s.Append(ctx, "s1", message(2))
			if fenced := errors.Is(err, ErrFenced); fenced != tc.fenced {
				t.Errorf("the next append: %v, want fenced %v", err, tc.fenced)
			}
		})
	}
}

// expire takes session s1's lease out of its bucket as its max_age does,
// with no marker.
func expire(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.ownersStream.Purge(ctx, jetstream.WithPurgeSubject(ownersSubject+"s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.owners.Get(ctx, "s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the lease's key once expired: %v, want ErrKeyNotFound", err)
	}
}

// releasedAfterRead is the leases' stream, whose read of a lease is
// followed at once by an operator's ForceRelease of it.
type releasedAfterRead struct {
	jetstream.Stream
	s *Store
}

func (r releasedAfterRead) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := r.Stream.GetLastMsgForSubject(ctx, subject)
	if ferr := r.s.ForceRelease(ctx, "s1"); ferr != nil {
		return nil, ferr
	}
	return m, err
}

// TestRenewKeepsAForceReleaseThatLandsAsItRetakes: a renewal that read an
// expired lease takes it again only while the key has no message at all.
// A create would write over the purge marker of a ForceRelease that landed
// after the read, and the holder, told to stop, would go on. The lease is
// lost at the next renewal, which finds the marker.
func TestRenewKeepsAForceReleaseThatLandsAsItRetakes(t *testing.T) {
	ctx := context.Background()
	s, o, losses := holding(t, Options{URL: natstest.Server(t, nil), Node: "n1", LeaseTTL: time.Minute})
	expire(t, s)
	stream := s.ownersStream
	s.ownersStream = releasedAfterRead{stream, s}
	o.renew()
	s.ownersStream = stream
	if _, err := s.owners.Get(ctx, "s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the lease after a ForceRelease that landed as the renewal took it again: %v, want it released", err)
	}
	o.renew()
	if *losses != 1 || !o.gone {
		t.Errorf("the next renewal: lost %d times (gone %v), want the lease lost once", *losses, o.gone)
	}
}
