//go:build linux

package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteErrorMended: a write that fails for another reason than a full
// disk (here a file size limit, as a read-only or failing disk would)
// stops the journal's stream as a full disk does. The store says what to
// mend, and once it is mended, without a restart, starts JetStream again
// after its wait: the step it refused is stored after what it held. It
// was down for good until a restart (an outside audit).
func TestWriteErrorMended(t *testing.T) {
	// The file size limit is the process's: the test runs in a process
	// of its own, where no other file (go test's own log) meets it.
	if os.Getenv(writeErrorChild) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // not past the parent's end
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWriteErrorMended$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), writeErrorChild+"=1")
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil:
			t.Fatalf("the test's own process: %v\n%s", err, out)
		case bytes.Contains(out, []byte("--- SKIP")):
			t.Skipf("skipped in its own process:\n%s", out)
		case !bytes.Contains(out, []byte("--- PASS: TestWriteErrorMended")):
			t.Fatalf("the test's own process ran no test:\n%s", out)
		}
		return
	}
	for v, d := range map[*time.Duration]time.Duration{&reviveEvery: 20 * time.Millisecond, &reviveFirstWait: 200 * time.Millisecond} {
		was := *v
		*v = d
		t.Cleanup(func() { *v = was })
	}
	dir := t.TempDir()
	s, step := openOwned(t, dir, time.Second)

	// No file of the process may grow past the largest the store has
	// now: the next step's block write fails (EFBIG; Go ignores SIGXFSZ).
	var largest int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				largest = max(largest, info.Size())
			}
		}
		return nil
	})
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	limited := was
	limited.Cur = uint64(largest + 1024)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited); err != nil {
		t.Skipf("cannot limit the file size here: %v", err)
	}
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(lift)
	// Each start of JetStream stores until a write fails again (the
	// engine tries its step again every second, as here), and the starts
	// come less and less often: the store says it stores nothing between.
	tries := make(chan error, 1)
	inFlight := false
	var down error
	waitFor(t, "the store to say it stores nothing", func() bool {
		if !inFlight {
			inFlight = true
			go func() { tries <- step(2) }()
		}
		select {
		case err := <-tries:
			inFlight = false
			if err == nil {
				t.Fatal("a step past the file size limit was stored")
			}
		default:
		}
		down = s.Healthy()
		return down != nil
	})
	if inFlight {
		<-tries // the try under way ends before the next
	}
	if !strings.Contains(down.Error(), "mend what failed") || strings.Contains(down.Error(), "MiB free") {
		t.Errorf("Healthy after a write error: %v, want it to say what to mend, not to wait for room", down)
	}

	lift()
	waitFor(t, "the step to be stored once the writes work", func() bool { return step(2) == nil })
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy once the writes work: %v", err)
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the journal holds events %v, want [1 2]", seqs)
	}
}

// writeErrorChild marks the process TestWriteErrorMended runs its body in.
const writeErrorChild = "GATEWAY_TEST_WRITE_ERROR_CHILD"
