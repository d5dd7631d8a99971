package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/control"
	"github.com/clienttools/gateway/engine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv("CONTROL_TEST_DIAL"); sock != "" {
		dialAsAnother(sock) // TestAnotherUserIsRefused's other user
		return
	}
	if sock := os.Getenv("CONTROL_TEST_SERVE"); sock != "" {
		serveAsAnother(sock) // TestAnotherUsersSocketIsRefused's other user
		return
	}
	goleak.VerifyTestMain(m)
}

// fakeChats is the engine's side of the socket: stored summaries, and a
// Delete that removes one or fails as told.
type fakeChats struct {
	mu       sync.Mutex
	sums     []engine.Summary
	failing  error // Delete's error while set
	deleted  []string
	unlisted []string // the ids DeleteUnlisted was asked for
}

func (f *fakeChats) options() control.Options {
	return control.Options{
		Summaries: func(context.Context) ([]engine.Summary, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]engine.Summary(nil), f.sums...), nil
		},
		Delete: func(_ context.Context, id, owner string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failing != nil {
				return f.failing
			}
			for i, s := range f.sums {
				if s.ID == id && s.Owner == owner {
					f.sums = append(f.sums[:i], f.sums[i+1:]...)
					f.deleted = append(f.deleted, owner+"/"+id)
					return nil
				}
			}
			return fmt.Errorf("%w: not this owner's", engine.ErrNoSession)
		},
		DeleteUnlisted: func(_ context.Context, id string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.unlisted = append(f.unlisted, id)
			return fmt.Errorf("%w: neither a summary nor a journal", engine.ErrNoSession)
		},
	}
}

// serve serves o on dir's control socket until the test ends.
func serve(t *testing.T, dir string, o control.Options) {
	t.Helper()
	ln, err := control.Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: control.Handler(o)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
}

func dial(t *testing.T, dir string) *control.Client {
	t.Helper()
	c, err := control.Dial(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestCommandsOnTheRunningGateway: the list is every owner's sessions,
// newest first, a JSON object a line; a deletion reaches the engine with
// the owner the list names, and the list no longer has it; a session no
// one lists is 404's error; a store that fails is named, and the same
// request deletes it once the store is back.
func TestCommandsOnTheRunningGateway(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	chats := &fakeChats{sums: []engine.Summary{
		{ID: "s-old", Owner: "alice", Title: "my name is Ada", Created: t0, Updated: t0},
		{ID: "s-new", Owner: "bob", Title: "weather", Created: t0, Updated: t0.Add(time.Hour), Ended: true},
	}}
	serve(t, dir, chats.options())
	c := dial(t, dir)
	ctx := context.Background()

	var out bytes.Buffer
	if err := c.Sessions(ctx, &out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var s control.Session
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids = append(ids, s.Owner+"/"+s.ID)
	}
	if got := strings.Join(ids, " "); got != "bob/s-new alice/s-old" {
		t.Errorf("the list: %s, want bob/s-new alice/s-old (newest first, every owner)", got)
	}

	chats.failing = fmt.Errorf("%w: nats: timeout", engine.ErrStoreUnavailable)
	if err := c.Delete(ctx, "s-old"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "nats: timeout") {
		t.Errorf("a deletion the store refused: %v, want a 503 naming the store's error", err)
	}
	chats.failing = nil
	if err := c.Delete(ctx, "s-old"); err != nil {
		t.Fatalf("the deletion asked again: %v", err)
	}
	if strings.Join(chats.deleted, " ") != "alice/s-old" {
		t.Errorf("the engine deleted %v, want alice/s-old (the owner the list names)", chats.deleted)
	}
	for _, id := range []string{"s-old", "no-such-chat", "../sessions"} {
		if err := c.Delete(ctx, id); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("deleting %q: %v, want a 404", id, err)
		}
	}
	if strings.Join(chats.unlisted, " ") != "s-old no-such-chat" {
		t.Errorf("ids no list names went to DeleteUnlisted as %v, want s-old and no-such-chat (not an id that is none)", chats.unlisted)
	}
	out.Reset()
	if err := c.Sessions(ctx, &out); err != nil || strings.Contains(out.String(), "s-old") {
		t.Errorf("the list after the deletion: %v %s", err, out.String())
	}
}

// TestSocketFile: only the directory's owner may connect; a socket an
// earlier run left (a kill -9 leaves it) is found dead and replaced; a
// file that is no socket is not removed; a data directory whose socket
// path is too long has none, and the command finds no gateway there.
func TestSocketFile(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := control.Dial(ctx, dir); !errors.Is(err, control.ErrNotRunning) {
		t.Errorf("Dial with no socket: %v, want ErrNotRunning", err)
	}

	// An earlier run's socket, its listener gone without removing it.
	ln, err := control.Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := ln.(interface{ SetUnlinkOnClose(bool) }); ok {
		l.SetUnlinkOnClose(false)
	}
	ln.Close()
	if _, err := control.Dial(ctx, dir); !errors.Is(err, control.ErrNotRunning) {
		t.Errorf("Dial on a dead socket: %v, want ErrNotRunning", err)
	}
	serve(t, dir, (&fakeChats{}).options())
	fi, err := os.Stat(filepath.Join(dir, control.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("the socket's mode: %v, want 0600", perm)
	}
	if err := dial(t, dir).Sessions(ctx, new(bytes.Buffer)); err != nil {
		t.Errorf("the socket in place of the dead one: %v", err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, control.SocketName), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := control.Listen(other); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("Listen over a regular file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, control.SocketName)); string(b) != "mine" {
		t.Errorf("the regular file was changed: %q", b)
	}

	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if _, err := control.Listen(long); err == nil || !strings.Contains(err.Error(), "too long") && !strings.Contains(err.Error(), "over the") {
		t.Errorf("Listen in a directory of a long path: %v, want a refusal naming the length", err)
	}
	if _, err := control.Dial(ctx, long); !errors.Is(err, control.ErrNotRunning) {
		t.Errorf("Dial in a directory of a long path: %v, want ErrNotRunning", err)
	}
}

// TestBackupEndsWithItsCommand: the gateway copies into the directory the
// command names, and says what it copied; a command stopped meanwhile
// (Ctrl-C: its connection closes) stops the backup, which then removes
// what it wrote; a directory that is no absolute path is refused (the
// gateway's working directory is not the command's).
func TestBackupEndsWithItsCommand(t *testing.T) {
	dir := t.TempDir()
	started, stopped := make(chan struct{}, 1), make(chan error, 1)
	o := (&fakeChats{}).options()
	o.Backup = func(ctx context.Context, to string) (string, error) {
		if strings.HasSuffix(to, "quick") {
			return "GATEWAY_JOURNAL: 3 messages, 300 bytes\n", nil
		}
		started <- struct{}{}
		<-ctx.Done()
		stopped <- ctx.Err()
		return "", ctx.Err()
	}
	serve(t, dir, o)
	c := dial(t, dir)
	ctx := context.Background()
	if said, err := c.Backup(ctx, "/backups/quick"); err != nil || !strings.Contains(said, "GATEWAY_JOURNAL: 3 messages") {
		t.Errorf("a backup: %q %v", said, err)
	}
	if _, err := c.Backup(ctx, "backups/relative"); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a backup into a relative path: %v, want a 400 naming it", err)
	}
	cmd, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Backup(cmd, "/backups/slow"); done <- err }()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Error("a stopped command's backup: no error")
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the backup ended with %v, want its context cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the backup went on after its command stopped")
	}
}

// dialAsAnother is the process TestAnotherUserIsRefused runs as another
// user: it asks for the list of sessions and says what came back.
func dialAsAnother(sock string) {
	ctx := context.Background()
	c, err := control.Dial(ctx, filepath.Dir(sock))
	if err != nil {
		fmt.Println("refused: dial:", err)
		return
	}
	defer c.Close()
	if err := c.Sessions(ctx, io.Discard); err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println("answered")
}

// serveAsAnother is the process TestAnotherUsersSocketIsRefused runs as
// another user: a socket in the gateway's place that says every chat was
// deleted, until its stdin closes.
func serveAsAnother(sock string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("listening")
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
