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
// It locks gateway.lock, which says which process holds it, and the
// directory's marker (checkDataDir made sure it is there). gateway.lock
// keeps the last holder's process id, so it looks like a stale lock: a
// lock on it alone let a second gateway in once it was deleted. The
// marker is no such file, and a directory that lost it is refused before
// any lock. Both are files opened for writing, which flock needs on NFS.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "gateway.lock")
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close() // closing releases its flock
		}
	}
	for _, name := range []string{markerFile, "gateway.lock"} {
		flags := os.O_RDWR
		if name != markerFile {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(filepath.Join(dir, name), flags, 0o600)
		if err != nil {
			release()
			return nil, fmt.Errorf("failed to lock the data directory: %w", err)
		}
		held = append(held, f)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			release()
			return nil, fmt.Errorf("%s is in use by another gateway (%s): stop it, or give this one another --data-dir", dir, holder(path))
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("failed to lock the data directory: %w", err)
		}
	}
	lock := held[1]
	_ = lock.Truncate(0)
	_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return release, nil
}

// holder names the process whose id the lock file at path holds.
func holder(path string) string {
	b, _ := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return "process " + pid
	}
	return "another process"
}
