package main

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestSecondSignalEndsTheProcess: a second SIGINT or SIGTERM ends the
// process at once, with the signal's exit status, while the shutdown is
// under way (here with a page that never answers the close), even where the process
// started with SIGINT ignored, as a background job of a script does: the
// second SIGINT put back that disposition and did nothing.
func TestSecondSignalEndsTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildGatewayBinary(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		code int
	}{{"SIGINT, ignored at the start", syscall.SIGINT, 130}, {"SIGTERM", syscall.SIGTERM, 143}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := durableFreeAddr(t)
			base := "http://" + addr
			// The shell ignores SIGINT, and exec keeps that for the gateway.
			p := startCmd(t, "gateway", exec.Command("sh", "-c", `trap "" INT; exec "$0" "$@"`, bin, "--listen", addr, "--data-dir", t.TempDir(), "--log-level", "warn"), nil)
			p.waitHealthy(base)
			// A page that reads nothing: the shutdown waits for its close.
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			_ = p.cmd.Process.Signal(tc.sig)
			// The shutdown under way: its listener closed first. The page
			// does not hold it for long (the close of a socket whose reader
			// the shutdown cancelled can be quick): the second signal goes
			// as soon as the first is seen, not after a fixed wait, which
			// the whole shutdown sometimes took less than.
			for deadline := time.Now().Add(hang); ; time.Sleep(time.Millisecond) {
				resp, err := http.Get(base + "/healthz")
				if err != nil {
					break
				}
				resp.Body.Close()
				if time.Now().After(deadline) {
					t.Fatal("the gateway still answers after the first signal")
				}
			}
			_ = p.cmd.Process.Signal(tc.sig)
			var exit *exec.ExitError
			if err := p.wait(); !errors.As(err, &exit) || exitCode(exit) != tc.code {
				t.Errorf("after a second %v: %v, want exit status %d\nstderr:\n%s", tc.sig, err, tc.code, p.stderr.String())
			}
		})
	}
}

// exitCode is a process's exit status, or 128 and the signal that ended it.
func exitCode(exit *exec.ExitError) int {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}
