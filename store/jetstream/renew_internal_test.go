package jetstream

import (
	"context"
	"testing"
)

// BenchmarkRenew rewrites one held lease, as the renewer does every third
// of the lease's time to live for every session this node runs.
func BenchmarkRenew(b *testing.B) {
	s, err := Open(context.Background(), Options{DataDir: b.TempDir()})
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
			s, err := Open(ctx, Options{DataDir: t.TempDir(), Node: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			lost := false
			if _, err := s.Own(ctx, "s1", func() { lost = true }); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			o := s.owned["s1"]
			s.mu.Unlock()
			landed, err := s.publish(ctx, ownersSubject+"s1", []byte(tc.writer), o.rev)
			if err != nil {
				t.Fatal(err)
			}
			o.renew()
			if lost != tc.lost || o.gone != tc.lost {
				t.Fatalf("after a renewal by %s landed late: lost %v (gone %v), want %v", tc.writer, lost, o.gone, tc.lost)
			}
			if !tc.lost && o.rev <= landed {
				t.Errorf("the lease's revision %d, want past the one that landed (%d)", o.rev, landed)
			}
		})
	}
}
