package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
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
	url, a, b, baseA, baseB := twoNodes(t, "--lease-ttl", "2s")

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

	// The page reconnects to node B. Until A's lease expires, B cannot
	// reach A (paused) and closes the page (4001); then B takes the session
	// over.
	var second *pageConn
	deadline := time.Now().Add(6 * hang)
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
	// Its log reaches us through a pipe: the line may come just after the
	// session went.
	for deadline := time.Now().Add(hang); !strings.Contains(a.stderr.String(), "lease"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("node A did not say it lost the lease:\n%s", a.stderr.String())
			break
		}
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
	// A lease far longer than the test: only a handover can make B run it.
	_, a, _, baseA, baseB := twoNodes(t, "--lease-ttl", "10m")

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

// TestAnyNodeServesAnyBrowser: a page connected to a node that does not run
// its session is relayed to the node that does, frames in and frames out;
// when that node dies, the page stays: its node moves it to where the
// session runs next, once the dead node's lease expired, with nothing lost.
func TestAnyNodeServesAnyBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := newPair(t, "--lease-ttl", "2s", "--ping-interval", "1s")
	a, baseA, baseB, br, must := p.a, p.baseA, p.baseB, p.br, p.must
	ctx, cancel := context.WithTimeout(context.Background(), 4*hang)
	defer cancel()
	lastSeq := func() int64 {
		var last int64
		for _, r := range br.recorded() {
			if r.f.numbered() {
				last = *r.f.Seq
			}
		}
		return last
	}
	session := p.openOnA(ctx)

	// The browser comes back through node B: A still runs the session, so
	// B relays the page to A.
	second, err := br.dial(ctx, baseB, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = second.send(ctx, map[string]any{"type": "session.open", "session": session, "after": lastSeq(), "tools": durableTools})
	must(second.until("session.opened through node B", func(f wireFrame) bool { return f.Type == "session.opened" }))
	_ = second.send(ctx, map[string]any{"type": "message", "content": "delete my draft"})
	call := must(second.until("tool.call through node B", func(f wireFrame) bool { return f.Type == "tool.call" }))
	_ = second.send(ctx, map[string]any{"type": "tool.result", "id": call.f.ID, "attempt": call.f.Attempt, "result": map[string]bool{"approved": true}})
	if err := second.untilReplyIdle("Okay, I deleted your draft."); err != nil {
		t.Fatalf("%v\nframes:\n%s", err, br.dump())
	}
	// The session ran on A all along: B only moved frames.
	if na, nb := loadedSessions(t, baseA), loadedSessions(t, baseB); na != 1 || nb != 0 {
		t.Errorf("sessions in memory: A %d, B %d; want the session on A only", na, nb)
	}
	// A relayed page and its frames count once over the cluster, as
	// operations.md has the operator sum them: the page where its socket
	// is, its frames where its session runs.
	var ma, mb map[string]*dto.MetricFamily
	for deadline := time.Now().Add(hang); ; time.Sleep(50 * time.Millisecond) {
		ma, mb = scrape(t, br.http, baseA), scrape(t, br.http, baseB)
		if sampleValue(ma, "gateway_pages_connected", nil) == 0 || time.Now().After(deadline) {
			break // the first page's close is done
		}
	}
	calls := map[string]string{"type": "tool.call"}
	if callsA, callsB := sampleValue(ma, "gateway_frames_sent_total", calls), sampleValue(mb, "gateway_frames_sent_total", calls); callsA+callsB != 1 {
		t.Errorf("tool.call frames sent: A %v, B %v; want 1 over the two", callsA, callsB)
	}
	opens := map[string]string{"type": "session.open"}
	if opensA, opensB := sampleValue(ma, "gateway_frames_received_total", opens), sampleValue(mb, "gateway_frames_received_total", opens); opensA+opensB != 2 {
		t.Errorf("session.open frames read: A %v, B %v; want 2 over the two (the first page's, the relayed page's)", opensA, opensB)
	}
	if pagesA, pagesB := sampleValue(ma, "gateway_pages_connected", nil), sampleValue(mb, "gateway_pages_connected", nil); pagesA != 0 || pagesB != 1 {
		t.Errorf("pages connected: A %v, B %v; want the relayed page on B only", pagesA, pagesB)
	}

	// Node A dies. The page connected to B stays: B moves it, once A's
	// lease has expired, to where the session runs next (B itself), and the
	// page gets a new session.opened and what it missed. The message the
	// page sends before B noticed went to A's subscription, gone with it:
	// B sends it again once the page moved.
	_ = a.cmd.Process.Kill()
	_ = a.wait()
	_ = second.send(ctx, map[string]any{"type": "message", "content": "hello again"})
	moved := must(second.until("session.opened after A died", func(f wireFrame) bool { return f.Type == "session.opened" }))
	if moved.f.Session != session {
		t.Errorf("the moved page opened %s, want %s", moved.raw, session)
	}
	must(second.until("a reply on node B", func(f wireFrame) bool {
		role, content := f.chat()
		return f.Type == "message" && role == "assistant" && content != "" && *f.Seq > moved.f.seq()
	}))
	if na := loadedSessions(t, baseB); na != 1 {
		t.Errorf("node B holds %d sessions, want the moved one", na)
	}
	// Every numbered event, across the pages and the two nodes, once and
	// in order; the call settled once.
	var seqs []int64
	finished := 0
	seen := map[int64]bool{}
	for _, r := range br.recorded() {
		if !r.f.numbered() || seen[*r.f.Seq] {
			continue // a replay repeats what the page's browser had seen
		}
		seen[*r.f.Seq] = true
		seqs = append(seqs, *r.f.Seq)
		if r.f.Type == "tool.finished" {
			finished++
		}
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs %v: a gap at %d", seqs, i+1)
		}
	}
	if finished != 1 {
		t.Errorf("%d tool.finished, want 1", finished)
	}
}

// loadedSessions is the count of sessions a node's /healthz says it holds.
func loadedSessions(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Sessions int }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Sessions
}

// seq is a numbered frame's seq, or session.opened's.
func (f wireFrame) seq() int64 {
	if f.Seq == nil {
		return 0
	}
	return *f.Seq
}

// natsURL runs a NATS server with JetStream on loopback, as a member of the
// gateways' cluster would be, and returns its URL.
func natsURL(t *testing.T) string {
	t.Helper()
	return natstest.Server(t, nil)
}

// twoNodes starts a NATS server and two gateway processes on it, node-a and
// node-b, each with flags besides --nats-url and --node-id, and waits until
// both answer.
// pair is two gateway nodes on one NATS and a browser (a cookie jar) that
// uses both, for the relay's tests.
type pair struct {
	t            *testing.T
	a, b         *gatewayProc
	baseA, baseB string
	br           *durableBrowser
}

func newPair(t *testing.T, flags ...string) *pair {
	_, a, b, baseA, baseB := twoNodes(t, flags...)
	jar, _ := cookiejar.New(nil)
	return &pair{t: t, a: a, b: b, baseA: baseA, baseB: baseB, br: &durableBrowser{http: &http.Client{Jar: jar, Timeout: hang}}}
}

// must fails the test on err, with the frames the browser saw and both
// nodes' logs.
func (p *pair) must(r recFrame, err error) recFrame {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("%v\nframes:\n%s\nA's log:\n%s\nB's log:\n%s", err, p.br.dump(), p.a.stderr.String(), p.b.stderr.String())
	}
	return r
}

// openOnA opens a session on node A, its first page closed after it has
// opened; it returns the session's id.
func (p *pair) openOnA(ctx context.Context) string {
	p.t.Helper()
	first, err := p.br.dial(ctx, p.baseA, 1)
	if err != nil {
		p.t.Fatal(err)
	}
	_ = first.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
	session := p.must(first.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })).f.Session
	_ = first.send(ctx, map[string]any{"type": "message", "content": "hello"})
	p.must(first.until("session.idle", func(f wireFrame) bool { return f.Type == "session.idle" && *f.Seq > 2 }))
	_ = first.ws.Close(websocket.StatusNormalClosure, "")
	return session
}

func twoNodes(t *testing.T, flags ...string) (url string, a, b *gatewayProc, baseA, baseB string) {
	t.Helper()
	url = natsURL(t)
	bin := buildGatewayBinary(t)
	start := func(name string) (*gatewayProc, string) {
		addr := durableFreeAddr(t)
		p := startGatewayProc(t, name, bin, addr, t.TempDir(), append([]string{"--nats-url", url, "--node-id", name}, flags...)...)
		return p, "http://" + addr
	}
	a, baseA = start("node-a")
	b, baseB = start("node-b")
	a.waitHealthy(baseA)
	b.waitHealthy(baseB)
	return url, a, b, baseA, baseB
}

// TestRelayedPageMovesAfterTheLease: a relayed page that only waits (a
// confirm open, nothing sent) is moved soon after its node's lease
// expired, not at its own next ping, which here is minutes away: its node
// watches the serving node for all its pages. A dead node has no
// subscriptions left, and says so at once; a paused one (a hung process,
// a partition) answers nothing, and the page's node moves the page when
// it takes the session over itself.
func TestRelayedPageMovesAfterTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	killNode := func(a *gatewayProc) func() {
		_ = a.cmd.Process.Kill()
		_ = a.wait()
		return func() {}
	}
	hangNode := func(a *gatewayProc) func() {
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		return func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }
	}
	// A node restarted under its --node-id (a pod's name) takes its
	// sessions back at once, and answers the page's node for its name,
	// but serves none of the dead process's pipes (an outside audit: the
	// page waited for its own ping).
	restartNode := func(a *gatewayProc) func() {
		_ = a.cmd.Process.Kill()
		_ = a.wait()
		startCmd(a.t, a.name+" again", exec.Command(a.cmd.Path, a.cmd.Args[1:]...), nil)
		return func() {}
	}
	for _, tc := range []struct {
		name string
		stop func(a *gatewayProc) (resume func())
	}{
		{"the serving node dies", killNode},
		{"the serving node hangs", hangNode},
		{"the serving node restarts under its name", restartNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, "--lease-ttl", "2s", "--ping-interval", "5m")
			br, must := p.br, p.must
			ctx, cancel := context.WithTimeout(context.Background(), 4*hang)
			defer cancel()
			session := p.openOnA(ctx)

			second, err := br.dial(ctx, p.baseB, 2)
			if err != nil {
				t.Fatal(err)
			}
			_ = second.send(ctx, map[string]any{"type": "session.open", "session": session, "tools": durableTools})
			must(second.until("session.opened through node B", func(f wireFrame) bool { return f.Type == "session.opened" }))
			_ = second.send(ctx, map[string]any{"type": "message", "content": "delete my draft"})
			call := must(second.until("tool.call through node B", func(f wireFrame) bool { return f.Type == "tool.call" }))

			resume := tc.stop(p.a)
			defer resume()
			moved := must(second.until("session.opened on node B after A stopped", func(f wireFrame) bool { return f.Type == "session.opened" }))
			if moved.f.Session != session {
				t.Errorf("the moved page opened %s, want %s", moved.raw, session)
			}
			again := must(second.until("the call delivered again", func(f wireFrame) bool { return f.Type == "tool.call" && f.ID == call.f.ID }))
			if again.f.Attempt != call.f.Attempt || again.f.Deadline != call.f.Deadline {
				t.Errorf("the call came back as attempt %d, deadline %s; want the same attempt %d, deadline %s", again.f.Attempt, again.f.Deadline, call.f.Attempt, call.f.Deadline)
			}
			_ = second.send(ctx, map[string]any{"type": "tool.result", "id": call.f.ID, "attempt": call.f.Attempt, "result": map[string]bool{"approved": true}})
			if err := second.untilReplyIdle("Okay, I deleted your draft."); err != nil {
				t.Fatalf("%v\nframes:\n%s", err, br.dump())
			}
		})
	}
}

// TestNodeNameTaken: a node started with the --node-id of a node running on
// the same NATS stops at start, naming the flag, before it resumes a
// session: it would take the running node's sessions for its own.
func TestNodeNameTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	url, _, _, _, _ := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildGatewayBinary(t), "--listen", durableFreeAddr(t), "--data-dir", t.TempDir(), "--nats-url", url, "--node-id", "node-a")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), `"node-a" answers on this NATS; give each node its own --node-id`) {
		t.Fatalf("a second node-a: %v\n%s\nwant it to stop, naming --node-id", err, out)
	}
}

// TestOrphanedSessionIsTakenOver: a session with a browser call in flight
// whose node dies while no page is connected anywhere is taken over by
// another node once its lease has expired, without a page or a request
// asking for it: the call times out and is retried there, under its
// policy (never_answers: 2 attempts of 1 s), and settles.
func TestOrphanedSessionIsTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := newPair(t, "--lease-ttl", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 4*hang)
	defer cancel()
	page, err := p.br.dial(ctx, p.baseA, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = page.send(ctx, map[string]any{"type": "session.open", "tools": []string{"never_answers"}})
	p.must(page.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" }))
	_ = page.send(ctx, map[string]any{"type": "message", "content": "test slow tool"})
	p.must(page.until("the call", func(f wireFrame) bool { return f.Type == "tool.call" && f.Name == "never_answers" }))
	_ = page.ws.Close(websocket.StatusNormalClosure, "")
	_ = p.a.cmd.Process.Kill()
	_ = p.a.wait()

	settled := map[string]string{"tool": "never_answers", "outcome": "error", "code": "timeout"}
	for deadline := time.Now().Add(hang); ; time.Sleep(100 * time.Millisecond) {
		families := scrape(t, p.br.http, p.baseB)
		if n := sampleValue(families, "gateway_pages_connected", nil); n != 0 {
			t.Fatalf("%v pages on node B: the test meant none", n)
		}
		if sampleValue(families, "gateway_tool_calls_settled_total", settled) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node B never settled the dead node's call\nB's log:\n%s", p.b.stderr.String())
		}
	}
}

// TestStopNamesTheNodeThatRunsTheChat: a front end's Stop that reaches a
// node other than the one that runs the chat answers 503, naming why, as
// the front end's other routes do; it answered 204 and stopped nothing.
func TestStopNamesTheNodeThatRunsTheChat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := newPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	body := `{"id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"stream a long answer"}]}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.baseA+"/api/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.br.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("node A's stream: %q, %v", line, err)
	}
	stop, err := p.br.http.Post(p.baseB+"/api/chat/chat-1/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	said, _ := io.ReadAll(stop.Body)
	stop.Body.Close()
	if stop.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(said), "runs on another gateway node") {
		t.Errorf("a Stop on node B of node A's chat: %s %q, want 503 naming another node", stop.Status, said)
	}
	// On node A, the one that runs it, it stops.
	stop, err = p.br.http.Post(p.baseA+"/api/chat/chat-1/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	stop.Body.Close()
	if stop.StatusCode != http.StatusNoContent {
		t.Errorf("a Stop on node A: %s, want 204", stop.Status)
	}
}

// TestDeleteOnAnyNode: a chat deleted through a node that does not run it
// is deleted by the node that does (the relay asks it): its page there
// reads session.ended {reason: "deleted"}, and neither node lists or has
// it.
func TestDeleteOnAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := newPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	page, err := p.br.dial(ctx, p.baseA, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = page.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
	session := p.must(page.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })).f.Session
	_ = page.send(ctx, map[string]any{"type": "message", "content": "hello"})
	p.must(page.until("session.idle", func(f wireFrame) bool { return f.Type == "session.idle" && *f.Seq > 2 }))

	del := func(base string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/sessions/"+session, nil)
		resp, err := p.br.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := del(p.baseB); status != http.StatusNoContent {
		t.Fatalf("DELETE on node B of node A's chat: %d %q, want 204\nA's log:\n%s\nB's log:\n%s", status, body, p.a.stderr.String(), p.b.stderr.String())
	}
	ended := p.must(page.until("session.ended on node A", func(f wireFrame) bool { return f.Type == "session.ended" }))
	if !strings.Contains(string(ended.raw), `"reason":"deleted"`) {
		t.Errorf("session.ended = %s, want reason deleted", ended.raw)
	}
	for _, base := range []string{p.baseA, p.baseB} {
		resp, err := p.br.http.Get(base + "/sessions")
		if err != nil {
			t.Fatal(err)
		}
		list, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(list), session) {
			t.Errorf("%s lists the deleted chat: %s", base, list)
		}
		if status, _ := del(base); status != http.StatusNotFound {
			t.Errorf("DELETE again on %s: %d, want 404", base, status)
		}
	}
}
