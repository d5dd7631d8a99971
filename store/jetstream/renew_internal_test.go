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
