//go:build linux

package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// TestFullDisk: a real full disk, a tmpfs of 24 MiB. A write that finds
// it full stops the journal's stream for good (a write error: the server
// answers no append from then on, and keeps JetStream on). The store says
// so (Healthy) and refuses appends at once meanwhile; once the disk has
// room it starts JetStream again, and the step it refused is stored after
// what it held. Needs a tmpfs mount (root, as CI runs).
func TestFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("cannot mount a small disk here (%v): the test needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	looksEvery(t, 50*time.Millisecond)

	s, step := openOwned(t, filepath.Join(dir, "data"), 10*time.Second)
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 1<<20); ; {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	_ = f.Close()

	if err := step(2); err == nil {
		t.Fatal("a step was stored on a full disk")
	}
	waitFor(t, "the store to say it stores nothing", func() bool { return s.Healthy() != nil })
	if err := s.Healthy(); !strings.Contains(err.Error(), "write failed") {
		t.Errorf("Healthy on a full disk: %v", err)
	}
	if err := step(2); err == nil || !strings.Contains(err.Error(), "stores nothing") {
		t.Errorf("a step while the store is known down: %v, want it refused as such", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the step to be stored once the disk has room", func() bool { return step(2) == nil })
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy once the disk has room: %v", err)
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the journal holds events %v, want [1 2]", seqs)
	}
}

// openOwned opens a store on dataDir that owns session s1 and holds its
// first step, and returns it with step, which appends event seq padded to
// 64 KiB, waiting for the store at most timeout.
func openOwned(t *testing.T, dataDir string, timeout time.Duration) (*Store, func(seq int64) error) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 64<<10)
	step := func(seq int64) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ev := engine.Event{Seq: seq, Type: "message", Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d,"pad":%q}`, seq, pad))}
		return s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}})
	}
	if err := step(1); err != nil {
		t.Fatal(err)
	}
	return s, step
}
