package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats-server/v2/server"
)

// TestJetStreamComesBackOn: a server that turned JetStream off (as a
// clustered one does when a write finds the disk full,
// ShutdownJetStream), left alone, never turns it on again. The store turns
// it back on once the disk has room, so a step the store refused meanwhile
// is stored, as storage.md promises, and the journal holds everything from
// before. A standalone server's own full disk: TestFullDisk.
func TestJetStreamComesBackOn(t *testing.T) {
	was := reviveEvery
	reviveEvery = 20 * time.Millisecond
	t.Cleanup(func() { reviveEvery = was })
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Own(ctx, "s1", func() { t.Error("lost the lease") }); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64) engine.Event {
		return engine.Event{Seq: seq, Type: "message", Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, seq))}
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.embedded.ns.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	// The engine tries a refused step again every second, with a context
	// that never ends; each try here is bounded by the client's timeout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(2)}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step is still refused 30 s after JetStream went off: %v (healthy: %v)", err, s.Healthy())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy after JetStream came back on: %v", err)
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the journal holds events %v, want [1 2]", seqs)
	}
}

// TestReviveWaitsForJetStreamToStop: nats-server turns JetStream off in
// steps (marked off, its streams stopped, the JetStream let go of), and a
// revive that turned it on before the last step had its new JetStream let
// go of in its place: the new streams ran on with their files open, the
// next start waited 10 s (reviveFirstWait), and a JetStream request could
// meet a nil and end the process. Revive, tried over and over while
// JetStream goes off, turns it on only once it is off, at the first try
// after.
func TestReviveWaitsForJetStreamToStop(t *testing.T) {
	was := reviveEvery
	reviveEvery = time.Hour // the tries are the test's own
	t.Cleanup(func() { reviveEvery = was })
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		goleak.VerifyNone(t) // no stream of a JetStream let go of runs on
	})
	if _, err := s.Own(ctx, "s1", func() { t.Error("lost the lease") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{{Seq: 1, Type: "message",
		Frame: json.RawMessage(`{"type":"message","seq":1}`)}}}); err != nil {
		t.Fatal(err)
	}

	off := make(chan error)
	go func() { off <- s.embedded.ns.ShutdownJetStream() }()
	tries := 0
	for stopping := true; stopping; tries++ {
		select {
		case err := <-off:
			if err != nil {
				t.Fatal(err)
			}
			stopping = false
		default:
		}
		if _, err := s.embedded.revive(); err != nil {
			t.Fatalf("revive while JetStream goes off: %v", err)
		}
	}
	on, err := s.embedded.revive()
	if err != nil || !on && !s.embedded.ns.JetStreamEnabled() {
		t.Fatalf("revive once JetStream is off (%d tries while it went off): %v, %v; JetStream on: %v",
			tries, on, err, s.embedded.ns.JetStreamEnabled())
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1]" {
		t.Errorf("the journal holds events %v, want [1]", seqs)
	}
}

// TestReviveAfterAFailedStart: a start of JetStream that fails part way
// (its directory is no directory, as a disk mounted wrong may leave it)
// left nats-server's JetStream set up and said on, though it stored
// nothing: the store said it was healthy, and never started it again. It
// is let go of, the store says it stores nothing, and a later start, once
// what failed is mended, stores again, with everything from before.
func TestReviveAfterAFailedStart(t *testing.T) {
	was := reviveEvery
	reviveEvery = time.Hour // the tries are the test's own
	t.Cleanup(func() { reviveEvery = was })
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Own(ctx, "s1", func() { t.Error("lost the lease") }); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64) engine.Batch {
		return engine.Batch{Events: []engine.Event{{Seq: seq, Type: "message",
			Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, seq))}}}
	}
	if err := s.Append(ctx, "s1", ev(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.embedded.ns.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(s.embedded.storeDir, server.JetStreamStoreDir)
	if err := os.Rename(files, files+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	if on, err := s.embedded.revive(); err == nil || on {
		t.Fatalf("a start of JetStream in a file: %v, %v; want it to fail", on, err)
	}
	if err := s.embedded.off(); err == nil || !strings.Contains(err.Error(), "did not start again") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("the store after a failed start of JetStream: %v, want it to say the start failed, and why", err)
	}

	if err := os.Remove(files); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(files+".aside", files); err != nil {
		t.Fatal(err)
	}
	s.embedded.retryAt = time.Time{} // the wait after a failed start is over
	if on, err := s.embedded.revive(); err != nil || !on {
		t.Fatalf("a start once mended: %v, %v; want JetStream on", on, err)
	}
	if err := s.embedded.off(); err != nil {
		t.Errorf("the store once JetStream is on again: %v", err)
	}
	if err := s.Append(ctx, "s1", ev(2)); err != nil {
		t.Fatalf("an append once JetStream is on again: %v", err)
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the journal holds events %v, want [1 2]", seqs)
	}
}
