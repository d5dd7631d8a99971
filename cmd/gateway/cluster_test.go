package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// TestPausedOwnerIsFenced: two gateways share a NATS server. The one that
// runs a session is paused (SIGSTOP) past the session's lease; the other
// takes the session over and carries on, its call settling once; the
// paused one, resumed (SIGCONT), appends nothing more and gives the session
// up.
func TestPausedOwnerIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, MaxPayload: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(hang) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()

	bin := buildGatewayBinary(t)
	addrA, addrB := durableFreeAddr(t), durableFreeAddr(t)
	baseA, baseB := "http://"+addrA, "http://"+addrB
	cluster := func(name string) []string { return []string{"--nats-url", url, "--node-id", name, "--lease-ttl", "2s"} }
	a := startGatewayProc(t, "node-a", bin, addrA, t.TempDir(), cluster("node-a")...)
	b := startGatewayProc(t, "node-b", bin, addrB, t.TempDir(), cluster("node-b")...)
	a.waitHealthy(baseA)
	b.waitHealthy(baseB)

	jar, _ := cookiejar.New(nil)
	br := &durableBrowser{http: &http.Client{Jar: jar, Timeout: hang}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	first, err := br.dial(ctx, baseA, 1)
	if err != nil {
		t.Fatal(err)
	}
	must := func(r recFrame, err error) recFrame {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\nframes:\n%s", err, br.dump())
		}
		return r
	}
	_ = first.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
	session := must(first.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })).f.Session
	_ = first.send(ctx, map[string]any{"type": "message", "content": "delete my draft"})
	call := must(first.until("tool.call", func(f wireFrame) bool { return f.Type == "tool.call" }))
	var after int64
	for _, r := range br.recorded() {
		if r.f.numbered() {
			after = *r.f.Seq
		}
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := njs.New(nc)
	journal, err := js.Stream(ctx, "GATEWAY_JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	journalEnd := func() uint64 {
		t.Helper()
		m, err := journal.GetLastMsgForSubject(ctx, "gateway.journal."+session)
		if err != nil {
			t.Fatal(err)
		}
		return m.Sequence
	}

	// Node A stops, as a process paused by its host or cut off by a
	// partition, with its session, its lease and its page.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	// The page reconnects to node B. Until A's lease expires, B sends it
	// back (4001); then B takes the session over.
	var second *pageConn
	deadline := time.Now().Add(3 * hang)
	for second == nil {
		if time.Now().After(deadline) {
			t.Fatalf("node B never took the session over\nB's log:\n%s", b.stderr.String())
		}
		c, err := br.dial(ctx, baseB, 2)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.send(ctx, map[string]any{"type": "session.open", "session": session, "after": after, "tools": durableTools})
		_, err = c.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })
		if err == nil {
			second = c
			break
		}
		if code := websocket.CloseStatus(c.err); code != 4001 {
			t.Fatalf("node B refused the session with %v (close %v), want 4001 until the lease expires", err, code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	again := must(second.until("tool.call on node B", func(f wireFrame) bool { return f.Type == "tool.call" }))
	if !durableSameJSON(again.raw, call.raw) {
		t.Errorf("node B delivered\n %s\nnode A had\n %s", again.raw, call.raw)
	}
	_ = second.send(ctx, map[string]any{"type": "tool.result", "id": call.f.ID, "attempt": call.f.Attempt, "result": map[string]bool{"approved": true}})
	if err := second.untilReplyIdle("Okay, I deleted your draft."); err != nil {
		t.Fatalf("%v\nframes:\n%s", err, br.dump())
	}
	end := journalEnd()

	// Node A wakes: it must find its lease gone, append nothing, and let
	// the session go.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	paused = false
	var health struct{ Sessions int }
	deadline = time.Now().Add(hang)
	for {
		resp, err := http.Get(baseA + "/healthz")
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&health)
			resp.Body.Close()
			if health.Sessions == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node A still holds %d sessions after it woke\nA's log:\n%s", health.Sessions, a.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := journalEnd(); got != end {
		t.Errorf("the journal moved from %d to %d after node A woke: A appended after losing its lease", end, got)
	}
	if !strings.Contains(a.stderr.String(), "lease") {
		t.Errorf("node A did not say it lost the lease:\n%s", a.stderr.String())
	}
	finished := 0
	for _, r := range br.recorded() {
		if r.f.Type == "tool.finished" {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("%d tool.finished, want 1\n%s", finished, br.dump())
	}
	// The session lives on, on node B.
	_ = second.send(ctx, map[string]any{"type": "message", "content": "hello"})
	if _, err := second.until("a reply on node B", func(f wireFrame) bool {
		role, _ := f.chat()
		return f.Type == "message" && role == "assistant"
	}); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("%v\nframes:\n%s", err, br.dump())
	}
}

// recorded is a copy of the frames read so far.
func (b *durableBrowser) recorded() []recFrame {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]recFrame(nil), b.frames...)
}

// TestSigtermHandsOver: a node stopped with SIGTERM (a rolling deploy)
// gives its sessions' leases back: another node runs them at once, not
// after the lease's time to live.
func TestSigtermHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, MaxPayload: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(hang) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	bin := buildGatewayBinary(t)
	addrA, addrB := durableFreeAddr(t), durableFreeAddr(t)
	baseA, baseB := "http://"+addrA, "http://"+addrB
	// A lease far longer than the test: only a handover can make B run it.
	cluster := func(name string) []string { return []string{"--nats-url", ns.ClientURL(), "--node-id", name, "--lease-ttl", "10m"} }
	a := startGatewayProc(t, "node-a", bin, addrA, t.TempDir(), cluster("node-a")...)
	b := startGatewayProc(t, "node-b", bin, addrB, t.TempDir(), cluster("node-b")...)
	a.waitHealthy(baseA)
	b.waitHealthy(baseB)

	jar, _ := cookiejar.New(nil)
	br := &durableBrowser{http: &http.Client{Jar: jar, Timeout: hang}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	must := func(r recFrame, err error) recFrame {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\nframes:\n%s", err, br.dump())
		}
		return r
	}
	first, err := br.dial(ctx, baseA, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = first.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
	session := must(first.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })).f.Session
	_ = first.send(ctx, map[string]any{"type": "message", "content": "delete my draft"})
	call := must(first.until("tool.call", func(f wireFrame) bool { return f.Type == "tool.call" }))

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(); err != nil {
		t.Fatalf("node A exited with %v", err)
	}
	second, err := br.dial(ctx, baseB, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = second.send(ctx, map[string]any{"type": "session.open", "session": session, "after": 0, "tools": durableTools})
	must(second.until("session.opened on node B at once", func(f wireFrame) bool { return f.Type == "session.opened" }))
	again := must(second.until("tool.call on node B", func(f wireFrame) bool { return f.Type == "tool.call" }))
	if again.f.ID != call.f.ID || again.f.Attempt != call.f.Attempt || again.f.Deadline != call.f.Deadline {
		t.Errorf("node B delivered %s, node A had %s", again.raw, call.raw)
	}
	_ = second.send(ctx, map[string]any{"type": "tool.result", "id": call.f.ID, "attempt": call.f.Attempt, "result": map[string]bool{"approved": true}})
	if err := second.untilReplyIdle("Okay, I deleted your draft."); err != nil {
		t.Fatalf("%v\nframes:\n%s", err, br.dump())
	}
}
