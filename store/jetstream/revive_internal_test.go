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
	s := revivable(t, 20*time.Millisecond)
	stopJetStream(t, s)
	// The engine tries a refused step again every second, with a context
	// that never ends; each try here is bounded by the client's timeout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Append(context.Background(), "s1", message(2))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step is still refused 30 s after JetStream went off: %v (healthy: %v)", err, s.Healthy())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The store says so at the end of the look that started it again,
	// which the step may beat.
	waitFor(t, "Healthy once JetStream is back on", func() bool { return s.Healthy() == nil })
	holdsSteps(t, s, "[1 2]")
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
	s := revivable(t, time.Hour)
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
		time.Sleep(time.Millisecond)
	}
	// Started at the second look that finds it off (the loop's last try
	// may have been the first).
	on, err := reviveLooks(s, 2)
	if err != nil || !on && !s.embedded.ns.JetStreamEnabled() {
		t.Fatalf("revive once JetStream is off (%d tries while it went off): %v, %v; JetStream on: %v",
			tries, on, err, s.embedded.ns.JetStreamEnabled())
	}
	holdsSteps(t, s, "[1]")
}

// TestReviveStartsAtALaterLook: nats-server stops JetStream by itself too
// (a write refused for its permissions, in a goroutine of its own), and a
// stop that overlaps revive's own lets go of whatever JetStream the server
// has when it ends: a start made before then ran on beside the next one,
// on the same files, and an acknowledged step was lost (an outside
// review's harness, two stops at once and a revive, 36 rounds of 40).
// Revive starts JetStream only at the second look in a row that finds it
// off, a look (reviveEvery, 2 s) after the first: two stops that began
// together are over by then in practice (a margin, not a proof).
func TestReviveStartsAtALaterLook(t *testing.T) {
	s := revivable(t, time.Hour)
	for round := range 10 {
		other := make(chan struct{})
		go func() { _ = s.embedded.ns.ShutdownJetStream(); close(other) }()
		_ = s.embedded.ns.ShutdownJetStream()
		if on, err := s.embedded.revive(); on || err != nil {
			t.Fatalf("round %d: the look right after JetStream was stopped: on %v, %v; want it left off", round, on, err)
		}
		<-other // a look later
		// Stopped with room on the disk: not for a full disk.
		if err := s.embedded.off(); err == nil || !strings.Contains(err.Error(), "after a write failed") {
			t.Fatalf("round %d: the store while JetStream is off, the disk with room: %v, want it to say a write failed", round, err)
		}
		s.embedded.retryAt = time.Time{} // the wait after the last start is over
		if on, err := reviveLooks(s, 2); !on || err != nil {
			t.Fatalf("round %d: the next look: on %v, %v; want JetStream started", round, on, err)
		}
	}
	storesStepTwo(t, s)
}

// TestReviveAfterAFailedStart: a start of JetStream that fails part way
// (its directory is no directory, as a disk mounted wrong may leave it)
// left nats-server's JetStream set up and said on, though it stored
// nothing: the store said it was healthy, and never started it again. It
// is let go of, the store says it stores nothing, and a later start, once
// what failed is mended, stores again, with everything from before.
func TestReviveAfterAFailedStart(t *testing.T) {
	s := revivable(t, time.Hour)
	stopJetStream(t, s)
	files := filepath.Join(s.embedded.storeDir, server.JetStreamStoreDir)
	if err := os.Rename(files, files+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// Off, and no start made yet: the first comes within four looks.
	if err := s.embedded.off(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("again within %v,", 4*reviveEvery)) {
		t.Errorf("the store with JetStream off: %v, want it to say when it starts again", err)
	}
	if on, err := reviveLooks(s, 2); err == nil || on {
		t.Fatalf("a start of JetStream in a file: %v, %v; want it to fail", on, err)
	}
	// The next start waits its turn, and the store says how long.
	if err := s.embedded.off(); err == nil || !strings.Contains(err.Error(), "did not start again") || !strings.Contains(err.Error(), "not a directory") ||
		!strings.Contains(err.Error(), fmt.Sprintf("again %v after its last start", reviveFirstWait)) {
		t.Errorf("the store after a failed start of JetStream: %v, want it to say the start failed, why, and when it tries again", err)
	}

	if err := os.Remove(files); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(files+".aside", files); err != nil {
		t.Fatal(err)
	}
	s.embedded.retryAt = time.Time{} // the wait after a failed start is over
	if on, err := reviveLooks(s, 2); err != nil || !on {
		t.Fatalf("a start once mended: %v, %v; want JetStream on", on, err)
	}
	if err := s.embedded.off(); err != nil {
		t.Errorf("the store once JetStream is on again: %v", err)
	}
	storesStepTwo(t, s)
}

// waitFor polls ok for up to 30 s: a bound against a hang, not a timing
// assertion.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// reviveLooks runs up to n of revive's looks, until one starts JetStream
// or fails.
func reviveLooks(s *Store, n int) (on bool, err error) {
	for range n {
		if on, err = s.embedded.revive(); on || err != nil {
			break
		}
	}
	return on, err
}

// revivable opens a store on the embedded server whose revive looks every
// every (time.Hour: only when the test calls it), holding session s1 with
// its first step, and checks when the test ends that no stream of a
// JetStream let go of runs on.
func revivable(t *testing.T, every time.Duration) *Store {
	t.Helper()
	looksEvery(t, every)
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		goleak.VerifyNone(t)
	})
	if _, err := s.Own(ctx, "s1", func() { t.Error("lost the lease") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "s1", message(1)); err != nil {
		t.Fatal(err)
	}
	return s
}

// looksEvery makes the stores the test opens look whether JetStream should
// go back on every every (time.Hour: only when the test calls revive).
func looksEvery(t *testing.T, every time.Duration) {
	was := reviveEvery
	reviveEvery = every
	t.Cleanup(func() { reviveEvery = was })
}

// message is a step of one message event, seq.
func message(seq int64) engine.Batch {
	return engine.Batch{Events: []engine.Event{{Seq: seq, Type: "message",
		Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, seq))}}}
}

// TestReviveAfterAStreamNotRecovered: a start of JetStream that could not
// load the journal's stream from its files (its metadata unreadable) is
// on, and stores nothing in it: the store said it was healthy. It says
// what failed, and starts JetStream again after its wait, which loads
// the stream once its files are mended.
func TestReviveAfterAStreamNotRecovered(t *testing.T) {
	s := revivable(t, time.Hour)
	stopJetStream(t, s)
	meta := filepath.Join(streamsDir(s), JournalStream, server.JetStreamMetaFile)
	good, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if on, err := reviveLooks(s, 2); !on || err != nil {
		t.Fatalf("a start with the journal's metadata damaged: %v, %v; want JetStream on", on, err)
	}
	if err := s.embedded.off(); err == nil || !strings.Contains(err.Error(), JournalStream) {
		t.Errorf("the store with the journal's stream not loaded: %v, want it to say so", err)
	}

	if err := os.WriteFile(meta, good, 0o600); err != nil {
		t.Fatal(err)
	}
	on := false
	for look := 0; !on && look < 6; look++ {
		s.embedded.retryAt = time.Time{} // the wait after the last start is over
		if on, err = s.embedded.revive(); err != nil {
			t.Fatal(err)
		}
	}
	if !on {
		t.Fatal("JetStream was not started again once the journal's files were mended")
	}
	if err := s.embedded.off(); err != nil {
		t.Errorf("the store once the journal's stream is loaded: %v", err)
	}
	storesStepTwo(t, s)
}

// TestAStrayStreamFolderIsNotTheStores: a folder under the server's
// streams that no stream of the store's owns (a deletion a crash cut
// short, something copied in) is not loaded, and stores nothing anyone
// waits for: the store stays healthy, where it said it stored nothing and
// started JetStream again for good.
func TestAStrayStreamFolderIsNotTheStores(t *testing.T) {
	s := revivable(t, time.Hour)
	stopJetStream(t, s)
	stray := filepath.Join(streamsDir(s), "KV_OLD", "msgs")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	if on, err := reviveLooks(s, 2); !on || err != nil {
		t.Fatalf("a start beside a stray stream folder: %v, %v; want JetStream on", on, err)
	}
	if err := s.embedded.off(); err != nil {
		t.Errorf("the store beside a stray stream folder: %v, want it healthy", err)
	}
	storesStepTwo(t, s)
}

// stopJetStream turns the embedded server's JetStream off, as nats-server
// does by itself.
func stopJetStream(t *testing.T, s *Store) {
	t.Helper()
	if err := s.embedded.ns.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
}

// storesStepTwo appends session s1's second step, after its first.
func storesStepTwo(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Append(context.Background(), "s1", message(2)); err != nil {
		t.Fatalf("the second step: %v", err)
	}
	holdsSteps(t, s, "[1 2]")
}

// holdsSteps checks the events session s1's journal holds.
func holdsSteps(t *testing.T, s *Store, want string) {
	t.Helper()
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != want {
		t.Errorf("the journal holds events %v, want %s", seqs, want)
	}
}

// streamsDir is the folder of the embedded server's streams.
func streamsDir(s *Store) string {
	return filepath.Join(s.embedded.storeDir, server.JetStreamStoreDir, server.DEFAULT_GLOBAL_ACCOUNT, "streams")
}
