package control_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clienttools/gateway/control"
)

// TestAnotherUserIsRefused: a process of another user that reaches the
// socket (its file's mode opened up, as it is for a moment before it is
// set) gets no answer: the connection is closed.
func TestAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs a process as another user, which only root may")
	}
	dir := t.TempDir()
	serve(t, dir, (&fakeChats{}).options())
	sock := filepath.Join(dir, control.SocketName)
	// The test binary where user nobody may run it, and the socket where
	// nobody may reach it.
	bin := copyTestBinary(t)
	for _, p := range []string{filepath.Dir(dir), dir, sock} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONTROL_TEST_DIAL="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "refused:") {
		t.Errorf("a process of user nobody on the socket: %v %s, want its request refused", err, out)
	}
}

// TestAnotherUsersSocketIsRefused: the command does not take a socket
// another user's process listens on, in a data directory open to it, for
// the gateway's (it could answer "deleted" to an erasure).
func TestAnotherUsersSocketIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs a process as another user, which only root may")
	}
	bin := copyTestBinary(t)
	dir := t.TempDir()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONTROL_TEST_SERVE="+filepath.Join(dir, control.SocketName))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line := make([]byte, 64)
	if n, _ := stdout.Read(line); !strings.HasPrefix(string(line[:n]), "listening") {
		t.Fatalf("the other user's server: %q", line[:n])
	}
	if _, err := control.Dial(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "not the gateway's") {
		t.Errorf("Dial of another user's socket: %v, want a refusal", err)
	}
}

// copyTestBinary copies this test binary where user nobody may run it.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "control.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's directories are 0700, and so is their parent.
	for _, p := range []string{filepath.Dir(filepath.Dir(bin)), filepath.Dir(bin)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}
