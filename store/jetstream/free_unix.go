//go:build linux || darwin

package jetstream

import "syscall"

// freeBytes is the room left for an unprivileged writer on the disk that
// holds dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
