package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/store/jetstream"
)

// TestEraseWithTheGatewayStopped: an operator asked to erase someone's
// chat, on the embedded store, with no cookie of theirs: gateway sessions
// finds it by its title (the person's first message), gateway delete
// deletes it with the gateway stopped, and the gateway, started again,
// neither lists nor opens it. (TestEraseWhileTheGatewayRuns: the same
// through the running gateway.)
func TestEraseWithTheGatewayStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, dir := buildGatewayBinary(t), t.TempDir()
	addr := durableFreeAddr(t)
	base := "http://" + addr
	start := func() *gatewayProc {
		p := startGatewayProc(t, "gateway", bin, addr, dir)
		p.waitHealthy(base)
		return p
	}
	stop := func(p *gatewayProc) {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(); err != nil {
			t.Fatalf("the gateway's exit: %v", err)
		}
	}
	admin := func(args ...string) (string, error) { return runCommand(bin, args...) }
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	jar, _ := cookiejar.New(nil)
	br := &durableBrowser{http: &http.Client{Jar: jar, Timeout: hang}}

	g := start()
	chat := func(text string) string {
		_, id := openChat(ctx, t, br, base, text)
		return id
	}
	erase, keep := chat("my name is Ada, what time is it"), chat("what's the weather in Tokyo")
	stop(g)

	out, err := admin("sessions", "--data-dir", dir)
	if err != nil {
		t.Fatalf("gateway sessions: %v\n%s", err, out)
	}
	var found string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s struct{ ID, Owner, Title string }
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("gateway sessions wrote %q, not a JSON object a line", line)
		}
		if strings.Contains(s.Title, "Ada") {
			found = s.ID
		}
	}
	if found != erase {
		t.Fatalf("the chat found by its title: %q, want %s\n%s", found, erase, out)
	}
	if out, err := admin("delete", "--data-dir", dir, found, "no-such-chat"); err == nil || !strings.Contains(out, found+": deleted") || !strings.Contains(out, "no-such-chat: not deleted") {
		t.Errorf("gateway delete: %v %q, want the chat deleted and the other named as not", err, out)
	}

	start()
	resp, err := br.http.Get(base + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(list), erase) || !strings.Contains(string(list), keep) {
		t.Errorf("the browser's chats after the erasure: %s, want %s alone", list, keep)
	}
	page, err := br.dial(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = page.send(ctx, map[string]any{"type": "session.open", "session": erase})
	if _, err := page.until("unknown_session", func(f wireFrame) bool { return f.Type == "error" && f.Code == "unknown_session" }); err != nil {
		t.Error(err)
	}
}

// TestAdminChangesNothingOfTheStore: the operator's commands read the
// store as the gateway left it, and leave its settings as its flags made
// them: a store kept with --retain 2160h (90 days) keeps its browsers'
// identities 90 days after a gateway sessions, which opened it with no
// such flag (it cut them to the default 30 days, and every identity older
// went at once). A directory with no store is refused, not made one.
func TestAdminChangesNothingOfTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const retain = 90 * 24 * time.Hour
	s, err := jetstream.Open(ctx, jetstream.Options{DataDir: dir, CookieLifetime: retain, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	for _, args := range [][]string{{"sessions", "--data-dir", dir}, {"delete", "--data-dir", dir, "no-such-chat"}} {
		err := runAdmin(ctx, args, func(string) string { return "" }, &out, &out)
		if args[0] == "sessions" && err != nil {
			t.Fatalf("gateway %v: %v\n%s", args, err, out.String())
		}
	}
	var next bytes.Buffer
	s, err = jetstream.Open(ctx, jetstream.Options{DataDir: dir, CookieLifetime: retain, Logger: slog.New(slog.NewTextHandler(&next, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if strings.Contains(next.String(), "bucket=") {
		t.Errorf("the gateway's next start found a bucket the commands changed:\n%s", next.String())
	}
	empty := t.TempDir()
	if err := runAdmin(ctx, []string{"sessions", "--data-dir", empty}, func(string) string { return "" }, &out, &out); err == nil || !strings.Contains(err.Error(), "holds no gateway store") {
		t.Errorf("gateway sessions on an empty directory: %v, want a refusal", err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("gateway sessions wrote %d files in a directory that held no store", len(entries))
	}
}

// TestEraseWhileTheGatewayRuns: the operator's commands reach the gateway
// that runs on the data directory, through its control socket: gateway
// sessions lists every browser's chats, and gateway delete ends a chat
// where it runs (its open page reads session.ended, reason "deleted") and
// purges it; the browser's list no longer has it. Killed (kill -9), the
// gateway leaves its socket behind: the commands then open the store
// themselves, and find the chat gone.
func TestEraseWhileTheGatewayRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, dir, base, br, g := startWithBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), hang) // after the build, which may take longer
	defer cancel()
	admin := func(args ...string) (string, error) {
		return runCommand(bin, append(args[:1:1], append([]string{"--data-dir", dir}, args[1:]...)...)...)
	}

	page, erase := openChat(ctx, t, br, base, "my name is Ada, what's the weather in Paris")

	out, err := admin("sessions")
	if err != nil || !strings.Contains(out, `"id":"`+erase+`"`) || !strings.Contains(out, "Ada") {
		t.Fatalf("gateway sessions beside the running gateway: %v\n%s\nwant the chat listed", err, out)
	}
	if out, err := admin("delete", erase); err != nil || !strings.Contains(out, erase+": deleted") {
		t.Fatalf("gateway delete beside the running gateway: %v\n%s", err, out)
	}
	if _, err := page.until("session.ended deleted", func(f wireFrame) bool { return f.Type == "session.ended" && f.Reason == "deleted" }); err != nil {
		t.Error(err)
	}
	resp, err := br.http.Get(base + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(list), erase) {
		t.Errorf("the browser's chats after the erasure: %s, want it gone", list)
	}
	if out, err := admin("delete", erase); err == nil || !strings.Contains(out, erase+": not deleted") || !strings.Contains(out, "404") {
		t.Errorf("gateway delete of a deleted chat: %v %q, want it named as not deleted (404)", err, out)
	}

	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = g.wait()
	if out, err := admin("sessions"); err != nil || strings.Contains(out, erase) {
		t.Errorf("gateway sessions after a kill -9, its socket left behind: %v\n%s\nwant the store opened, without the chat", err, out)
	}
}

// runCommand runs the binary with args, and returns its output, stdout
// then stderr.
func runCommand(bin string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String() + errOut.String(), err
}

// openChat opens a new chat on a page of br, says text in it and waits
// for the answer; the page stays open.
func openChat(ctx context.Context, t *testing.T, br *durableBrowser, base, text string) (*pageConn, string) {
	t.Helper()
	page, err := br.dial(ctx, base, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = page.send(ctx, map[string]any{"type": "session.open"})
	opened, err := page.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })
	if err != nil {
		t.Fatal(err)
	}
	_ = page.send(ctx, map[string]any{"type": "message", "content": text})
	if _, err := page.until("session.idle", func(f wireFrame) bool { return f.Type == "session.idle" && *f.Seq > 2 }); err != nil {
		t.Fatal(err)
	}
	return page, opened.f.Session
}

// TestBackupWhileTheGatewayRuns: gateway backup, beside a gateway that
// runs on the embedded store, copies every chat into a new directory while
// the chats go on; a gateway started on the copy (after the first was
// killed, kill -9) gives the browser its identity and its chat as it was
// at the copy, without what was said after. With the gateway stopped,
// the command copies the store itself.
func TestBackupWhileTheGatewayRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, dir, base, br, g := startWithBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang) // after the build, which may take longer; two starts of the gateway
	defer cancel()
	backup := filepath.Join(t.TempDir(), "backup")
	page, id := openChat(ctx, t, br, base, "what's the weather in Tokyo")

	out, err := runCommand(bin, "backup", "--data-dir", dir, "--to", backup)
	if err != nil || !strings.Contains(out, "GATEWAY_JOURNAL: ") {
		t.Fatalf("gateway backup beside the running gateway: %v\n%s", err, out)
	}
	_ = page.send(ctx, map[string]any{"type": "message", "content": "said after the backup"})
	if _, err := page.until("the second turn's idle", func(f wireFrame) bool {
		role, content := f.chat()
		return f.Type == "message" && role == "user" && content == "said after the backup"
	}); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = g.wait()

	g = startGatewayProc(t, "gateway on the backup", bin, strings.TrimPrefix(base, "http://"), backup)
	g.waitHealthy(base)
	resp, err := br.http.Get(base + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(list), id) {
		t.Fatalf("the browser's chats on the backup: %s, want %s (its identity and its chat restored)", list, id)
	}
	replay, err := br.dial(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = replay.send(ctx, map[string]any{"type": "session.open", "session": id, "after": 0})
	// Every user message up to one said now: the replay's come first.
	_ = replay.send(ctx, map[string]any{"type": "message", "content": "said on the backup"})
	var said []string
	if _, err := replay.until("the message said on the backup", func(f wireFrame) bool {
		role, content := f.chat()
		if f.Type == "message" && role == "user" {
			said = append(said, content)
		}
		return content == "said on the backup"
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(said, "|"); got != "what's the weather in Tokyo|said on the backup" {
		t.Errorf("the user's messages in the restored chat: %q, want the one said before the backup, then the new one", got)
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != nil {
		t.Fatalf("the gateway's exit: %v", err)
	}

	// Stopped (the first killed: its socket left behind), the command
	// opens the store itself.
	again := filepath.Join(t.TempDir(), "again")
	if out, err := runCommand(bin, "backup", "--data-dir", dir, "--to", again); err != nil || !strings.Contains(out, "GATEWAY_JOURNAL: ") {
		t.Errorf("gateway backup with the gateway stopped: %v\n%s", err, out)
	}
	if out, err := runCommand(bin, "backup", "--data-dir", dir, "--to", again); err == nil || !strings.Contains(out, "not empty") {
		t.Errorf("gateway backup into a directory that holds one: %v\n%s, want a refusal", err, out)
	}
}

// startWithBrowser starts the binary on a new data directory, and a
// browser with a cookie jar for it.
func startWithBrowser(t *testing.T) (bin, dir, base string, br *durableBrowser, g *gatewayProc) {
	t.Helper()
	bin, dir = buildGatewayBinary(t), t.TempDir()
	addr := durableFreeAddr(t)
	base = "http://" + addr
	jar, _ := cookiejar.New(nil)
	br = &durableBrowser{http: &http.Client{Jar: jar, Timeout: hang}}
	g = startGatewayProc(t, "gateway", bin, addr, dir)
	g.waitHealthy(base)
	return bin, dir, base, br, g
}
