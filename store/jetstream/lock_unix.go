//go:build unix

package jetstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on dir for this process: two
// gateways on one data directory would write the same journals, and the
// embedded server does not stop them. The lock goes with the process, a
// kill -9 included.
//
// It locks the directory itself, which nobody deletes by mistake, and
// gateway.lock, which says which process holds it: that file keeps the
// last holder's process id, so it looks like a stale lock, and a lock on
// it alone let a second gateway in once it was deleted (gateways before
// this one lock only the file, so both are held).
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "gateway.lock")
	lock := func(f *os.File) error {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is in use by another gateway (%s): stop it, or give this one another --data-dir", dir, holder(path))
		}
		if err != nil {
			return fmt.Errorf("failed to lock the data directory: %w", err)
		}
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to lock the data directory: %w", err)
	}
	if err := lock(d); err != nil {
		d.Close()
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("failed to lock the data directory: %w", err)
	}
	// Closing a file releases its flock.
	closeBoth := func() { f.Close(); d.Close() }
	if err := lock(f); err != nil {
		closeBoth()
		return nil, err
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return closeBoth, nil
}

// holder names the process whose id the lock file at path holds.
func holder(path string) string {
	b, _ := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return "process " + pid
	}
	return "another process"
}
