package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// TestAppendThroughAQuorumLoss: a cluster that loses its quorum leaves an
// append's publish in flight at the journal's leader, which refuses the
// next try at once, for a wrong last sequence: its subject has a message
// in process. The journal ends where this node's last append left it, so
// the refusal is no other node's write: the append fails as against a
// store that is down, the session waits, and its events are stored once,
// when the quorum is back. The store took it for another node's write
// (fenced), and the node gave the session up seconds before its lease's
// time (an outside audit of a three-server cluster). Meanwhile a write of
// the node's own, which an idle node's look makes, fails too.
func TestAppendThroughAQuorumLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("three NATS servers")
	}
	members := natstest.Cluster(t, 3)
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: strings.Join(natstest.URLs(members), ","), Node: "a", Replicas: 3, LeaseTTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Own(ctx, "s1", func() { t.Error("the lease was said lost") }); err != nil {
		t.Fatal(err)
	}
	delta := func(seq int64) engine.Batch {
		return engine.Batch{Events: []engine.Event{{Seq: seq, Type: "model.delta",
			Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":"t%d"}`, seq, seq))}}}
	}
	if err := s.Append(ctx, "s1", delta(1)); err != nil {
		t.Fatal(err)
	}

	// The journal's leader alone is left, this node's client on it.
	info, err := s.journal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leader *natstest.Member
	for _, m := range members {
		if m.Name == info.Cluster.Leader {
			leader = m
		} else {
			m.Stop()
		}
	}
	if leader == nil {
		t.Fatalf("the journal's leader %q is none of the cluster's servers", info.Cluster.Leader)
	}
	for deadline := time.Now().Add(30 * time.Second); !s.nc.IsConnected() || s.nc.ConnectedUrl() != leader.URL; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store's client did not reach the leader %s (on %q)", leader.URL, s.nc.ConnectedUrl())
		}
	}

	short, cancel := context.WithTimeout(ctx, time.Second)
	err = s.Append(short, "s1", delta(2))
	cancel()
	if err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("an append without a quorum: %v, want it to fail unfenced", err)
	}
	// Again, at once, as the engine's next step does: the leader still has
	// the first try in process.
	if err := s.Append(ctx, "s1", delta(2)); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("the append's next try without a quorum: %v, want it to fail unfenced", err)
	}
	// A write says what an idle node's look must tell, where a read may
	// be answered (engine.WriteProber).
	short, cancel = context.WithTimeout(ctx, time.Second)
	err = s.ProbeWrite(short)
	cancel()
	if err == nil {
		t.Error("ProbeWrite without a quorum: nil, want an error")
	}

	// A server back, the quorum with it: the step is stored, once.
	for _, m := range members {
		if m != leader {
			m.Start(t)
			break
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := s.Append(ctx, "s1", delta(2))
		if err == nil {
			break
		}
		if errors.Is(err, ErrFenced) || time.Now().After(deadline) {
			t.Fatalf("the append once the quorum is back: %v", err)
		}
	}
	if got := journalSeqs(t, s, "s1"); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("the journal's events %v, want [1 2]", got)
	}
	if err := s.Append(ctx, "s1", delta(3)); err != nil {
		t.Errorf("the append after: %v", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := s.ProbeWrite(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ProbeWrite once the quorum is back: %v", err)
		}
	}
}
