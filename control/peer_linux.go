package control

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer refuses a connection whose other end is a process of another
// user than this one's (root aside), whatever the socket file's mode: on
// the gateway's side, the file is made before its mode is set, and a data
// directory made beforehand may be open to others; on the command's, a
// socket there may be another user's.
func checkPeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a Unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("the peer's credentials: %w", credErr)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("its other end is a process of user %d, not of this one (%d) nor root", cred.Uid, os.Geteuid())
	}
	return nil
}
