package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/clienttools/gateway/testlog"
	"github.com/coder/websocket"
)

// TestDurableRestart runs the real binary on a --data-dir, opens
// durableBrowsers sessions that each wait on a client call, stops the
// process (SIGKILL, or SIGTERM and a clean exit), starts a new one on the
// same directory and port, and has every page resume with its cookie and
// the last seq it saw: it must get the same call again, answer it, see the
// model's reply once, and carry on.
//
// GATEWAY_DURABLE_TEST_LOGS=dir runs the gateways at --log-level debug and
// writes each one's stderr to a file in dir.
//
// One browser per session: durableBrowsers cookie jars, each with one
// session. Half the browsers get their gateway_session cookie from GET /,
// the other half from the /ws upgrade response. Independently, half the
// sessions ask "delete my draft" (confirm, 5m timeout) and half "what time
// is it" (get_local_time, --client-timeout, 30s by default): neither
// deadline passes during the restart.
func TestDurableRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and restarts it: not in -short")
	}
	bin := buildGatewayBinary(t)
	for _, tc := range []struct {
		name  string
		term  bool // SIGTERM and a clean exit, else SIGKILL
		flags []string
	}{
		{"SIGKILL", false, nil},
		{"SIGKILL, each write flushed to the disk", false, []string{"--fsync", "always"}},
		{"SIGTERM", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { testDurableRestart(t, bin, tc.term, tc.flags...) })
	}
}

// durableBrowsers is how many browsers, each with one session, live
// through the restart.
const durableBrowsers = 100

// durableTools are the client tools every page declares (the demo page's).
var durableTools = []string{"get_local_time", "set_theme", "confirm"}

// buildGatewayBinary builds the binary once for the whole package's run
// (a link takes seconds, and a dozen tests run it) into a folder TestMain
// removes.
func buildGatewayBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			if gobin, err = exec.LookPath(filepath.Join(os.Getenv("GOROOT"), "bin", "go")); err != nil {
				built.skip = "no go command to build the binary with"
				return
			}
		}
		if built.dir, built.err = os.MkdirTemp("", "gateway-test-bin-"); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "gateway")
		start := time.Now()
		if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		built.path, built.took = bin, time.Since(start)
	})
	switch {
	case built.skip != "":
		t.Skip(built.skip)
	case built.err != nil:
		t.Fatal(built.err)
	}
	t.Logf("the gateway binary, built in %v", built.took.Round(time.Millisecond))
	return built.path
}

// built is the binary buildGatewayBinary made.
var built struct {
	once      sync.Once
	path, dir string
	took      time.Duration
	skip      string
	err       error
}

// gatewayProc is the binary running as a child process.
type gatewayProc struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	stderr  *testlog.Buffer
	exited  chan struct{}
	waitErr error
}

func startGatewayProc(t *testing.T, name, bin, addr, dir string, extra ...string) *gatewayProc {
	t.Helper()
	level := "warn"
	var log io.Writer
	if logDir := os.Getenv("GATEWAY_DURABLE_TEST_LOGS"); logDir != "" {
		level = "debug"
		f, err := os.Create(filepath.Join(logDir, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()+"-"+name)+".log"))
		if err != nil {
			t.Fatal(err)
		}
		log = f
		t.Cleanup(func() { f.Close() })
	}
	return startCmd(t, name, exec.Command(bin, append([]string{"--listen", addr, "--data-dir", dir, "--log-level", level}, extra...)...), log)
}

// startCmd runs cmd, the binary or what execs it, as a gatewayProc named
// name, its stderr kept (and written to log too, unless nil): waited for,
// and killed when t ends if it has not exited.
func startCmd(t *testing.T, name string, cmd *exec.Cmd, log io.Writer) *gatewayProc {
	t.Helper()
	p := &gatewayProc{t: t, name: name, cmd: cmd, stderr: &testlog.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout = &testlog.Buffer{}
	p.cmd.Stderr = p.stderr
	if log != nil {
		p.cmd.Stderr = io.MultiWriter(p.stderr, log)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if s := p.stderr.String(); s != "" && (t.Failed() || testing.Verbose()) {
			t.Logf("%s stderr:\n%s", p.name, clipLog(s, 8000))
		}
	})
	return p
}

// wait waits for the process to exit and returns Wait's error.
func (p *gatewayProc) wait() error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(2 * hang): // the gateway's own grace is 10s
		p.t.Fatalf("%s did not exit", p.name)
		return nil
	}
}

// waitHealthy polls /healthz until it answers 200.
func (p *gatewayProc) waitHealthy(base string) { p.t.Helper(); p.waitHealthyFor(base, hang) }

// waitHealthyFor polls /healthz until it answers 200, for up to d.
func (p *gatewayProc) waitHealthyFor(base string, d time.Duration) {
	p.t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited before /healthz answered: %v\nstderr:\n%s", p.name, p.waitErr, clipLog(p.stderr.String(), 8000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: /healthz did not answer 200 (last: %v)", p.name, err)
		}
	}
}

// wireFrame is what the test reads of a gateway frame.
type wireFrame struct {
	Type     string          `json:"type"`
	Seq      *int64          `json:"seq"` // absent: not a session event
	Session  string          `json:"session"`
	Page     string          `json:"page"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Attempt  int             `json:"attempt"`
	Deadline string          `json:"deadline"`
	OK       bool            `json:"ok"`
	Code     string          `json:"code"`
	Reason   string          `json:"reason"`  // session.ended's
	Message  json.RawMessage `json:"message"` // an object in message events, a string in errors
}

// role and content of a message event.
func (f wireFrame) chat() (role, content string) {
	var m struct{ Role, Content string }
	_ = json.Unmarshal(f.Message, &m)
	return m.Role, m.Content
}

// numbered: a session event, with its seq (session.opened's seq is not one).
func (f wireFrame) numbered() bool { return f.Seq != nil && f.Type != "session.opened" }

type recFrame struct {
	phase int // 1 before the restart, 2 after
	raw   []byte
	f     wireFrame
}

// durableBrowser is one browser: its cookie jar, its one session, and every
// frame its pages read.
type durableBrowser struct {
	i       int
	http    *http.Client
	prompt  string // the message that makes the model call a client tool
	answer  string // the tool's result
	reply   string // what the model says once it has the answer
	session string
	call    recFrame // the tool.call before the restart
	after   int64    // the last seq the first page saw

	mu     sync.Mutex
	frames []recFrame
}

func (b *durableBrowser) record(r recFrame) {
	b.mu.Lock()
	b.frames = append(b.frames, r)
	b.mu.Unlock()
}

func (b *durableBrowser) dump() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, r := range b.frames {
		fmt.Fprintf(&sb, "  [%d] %s\n", r.phase, r.raw)
	}
	return sb.String()
}

// pageConn is one WebSocket of a browser, read on its own goroutine.
type pageConn struct {
	b      *durableBrowser
	phase  int
	ws     *websocket.Conn
	frames chan recFrame
	done   chan struct{}
	err    error // why reading stopped
}

func (b *durableBrowser) dial(ctx context.Context, base string, phase int) (*pageConn, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{HTTPClient: b.http})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	ws.SetReadLimit(1 << 20)
	c := &pageConn{b: b, phase: phase, ws: ws, frames: make(chan recFrame, 4096), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.frames)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.err = err
				return
			}
			r := recFrame{phase: phase, raw: data}
			if err := json.Unmarshal(data, &r.f); err != nil {
				r.f.Type = "(undecodable)"
			}
			b.record(r)
			c.frames <- r
		}
	}()
	return c, nil
}

func (c *pageConn) send(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// until reads frames until ok holds and returns that one. An error frame,
// session.ended, a closed socket or the hang guard end the wait with an
// error.
func (c *pageConn) until(what string, ok func(wireFrame) bool) (recFrame, error) {
	timer := time.NewTimer(hang)
	defer timer.Stop()
	for {
		select {
		case r, open := <-c.frames:
			if !open {
				return r, fmt.Errorf("waiting for %s: the socket closed: %v", what, c.err)
			}
			if ok(r.f) {
				return r, nil
			}
			if r.f.Type == "error" || r.f.Type == "session.ended" {
				return r, fmt.Errorf("waiting for %s: got %s", what, r.raw)
			}
		case <-timer.C:
			return recFrame{}, fmt.Errorf("waiting for %s: nothing after %v", what, hang)
		}
	}
}

// untilReplyIdle reads until the assistant says reply, then until the
// session.idle after it.
func (c *pageConn) untilReplyIdle(reply string) error {
	if _, err := c.until(fmt.Sprintf("the reply %q", reply), func(f wireFrame) bool {
		role, content := f.chat()
		return f.Type == "message" && role == "assistant" && content == reply
	}); err != nil {
		return err
	}
	_, err := c.until("session.idle after the reply", func(f wireFrame) bool { return f.Type == "session.idle" })
	return err
}

// closed waits for the reader to stop: the socket is gone.
func (c *pageConn) closed() error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(hang):
		return errors.New("the socket stayed open")
	}
}

func testDurableRestart(t *testing.T, bin string, term bool, flags ...string) {
	testStart := time.Now()
	dir := t.TempDir()
	addr := durableFreeAddr(t)
	base := "http://" + addr

	g1 := startGatewayProc(t, "gateway 1", bin, addr, dir, flags...)
	g1.waitHealthy(base)
	t.Logf("gateway 1 healthy after %v", time.Since(testStart).Round(time.Millisecond))

	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(transport.CloseIdleConnections)
	browsers := make([]*durableBrowser, durableBrowsers)
	for i := range browsers {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		b := &durableBrowser{i: i, http: &http.Client{Jar: jar, Transport: transport, Timeout: hang}}
		if (i/2)%2 == 0 {
			b.prompt, b.answer, b.reply = "delete my draft", `{"approved":true}`, "Okay, I deleted your draft."
		} else {
			b.prompt, b.answer, b.reply = "what time is it", `{"time":"12:00","timeZone":"Asia/Tokyo"}`, "Your page says it's 12:00 in Asia/Tokyo."
		}
		browsers[i] = b
	}
	fails := &durableFailures{t: t}
	report := fails.add

	// 1. Every browser opens a session and asks; the model calls a client
	// tool; nobody answers.
	pages := make([]*pageConn, len(browsers))
	errs := forEach(browsers, func(b *durableBrowser) error {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		if b.i%2 == 0 { // the cookie from the page, like a browser
			resp, err := b.http.Get(base + "/")
			if err != nil {
				return err
			}
			resp.Body.Close()
		}
		c, err := b.dial(ctx, base, 1)
		if err != nil {
			return err
		}
		pages[b.i] = c
		if err := c.send(ctx, map[string]any{"type": "session.open", "tools": durableTools}); err != nil {
			return err
		}
		opened, err := c.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })
		if err != nil {
			return err
		}
		b.session = opened.f.Session
		if err := c.send(ctx, map[string]any{"type": "message", "content": b.prompt}); err != nil {
			return err
		}
		b.call, err = c.until("tool.call", func(f wireFrame) bool { return f.Type == "tool.call" })
		return err
	})
	for i, err := range errs {
		if err != nil {
			report(browsers[i], fmt.Errorf("before the restart: %w", err))
		}
	}
	fails.flush()
	if t.Failed() {
		t.FailNow()
	}
	if n := len(durableCookies(browsers[0], base)); n == 0 {
		t.Fatal("the browser has no cookie")
	}

	// 2. Stop the process.
	killed := time.Now()
	t.Logf("%d sessions waiting on their call after %v", len(browsers), killed.Sub(testStart).Round(time.Millisecond))
	if term {
		transport.CloseIdleConnections()
		if err := g1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := g1.wait(); err != nil {
			t.Fatalf("gateway 1 exited with %v after SIGTERM, want status 0", err)
		}
	} else {
		if err := g1.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = g1.wait()
	}
	stopped := time.Now()
	for i, c := range pages {
		err := c.closed()
		b := browsers[i]
		switch {
		case err == nil:
			report(b, errors.New("the first page's socket ended without an error"))
		case err.Error() == "the socket stayed open":
			report(b, err)
		case term && websocket.CloseStatus(err) != websocket.StatusGoingAway:
			report(b, fmt.Errorf("after SIGTERM the socket ended with %v, want close status 1001", err))
		}
		b.mu.Lock()
		for _, r := range b.frames {
			if r.f.numbered() && *r.f.Seq > b.after {
				b.after = *r.f.Seq
			}
		}
		b.mu.Unlock()
	}
	fails.flush()
	if t.Failed() {
		t.FailNow()
	}

	// 3. A new process on the same directory and port.
	restarted := time.Now()
	g2 := startGatewayProc(t, "gateway 2", bin, addr, dir, flags...)
	g2.waitHealthy(base)
	healthy := time.Now()

	// 4. Every page comes back with its cookie and the last seq it saw, and
	// gets its call again.
	var mu sync.Mutex
	var lastResumed time.Time
	errs = forEach(browsers, func(b *durableBrowser) error {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		c, err := b.dial(ctx, base, 2)
		if err != nil {
			return err
		}
		defer c.ws.CloseNow()
		if err := c.send(ctx, map[string]any{"type": "session.open", "session": b.session, "after": b.after, "tools": durableTools}); err != nil {
			return err
		}
		first, err := c.until("session.opened", func(f wireFrame) bool { return true })
		if err != nil {
			return err
		}
		if first.f.Type != "session.opened" || first.f.Session != b.session || first.f.Seq == nil || *first.f.Seq < b.after {
			return fmt.Errorf("resumed with after %d: first frame %s, want session.opened of %s with seq ≥ %d", b.after, first.raw, b.session, b.after)
		}
		again, err := c.until("tool.call after the restart", func(f wireFrame) bool { return f.Type == "tool.call" })
		if err != nil {
			return err
		}
		mu.Lock()
		if now := time.Now(); now.After(lastResumed) {
			lastResumed = now
		}
		mu.Unlock()
		if again.f.ID != b.call.f.ID || again.f.Attempt != b.call.f.Attempt || again.f.Deadline != b.call.f.Deadline {
			return fmt.Errorf("after the restart got %s, want the same id, attempt and deadline as before: %s", again.raw, b.call.raw)
		}
		if !durableSameJSON(again.raw, b.call.raw) {
			return fmt.Errorf("after the restart the call is\n %s\nbefore it was\n %s", again.raw, b.call.raw)
		}
		if err := c.send(ctx, map[string]any{"type": "tool.result", "id": again.f.ID, "attempt": again.f.Attempt, "result": json.RawMessage(b.answer)}); err != nil {
			return err
		}
		if err := c.untilReplyIdle(b.reply); err != nil {
			return err
		}
		// 5. The session is alive: one more turn.
		if err := c.send(ctx, map[string]any{"type": "message", "content": "hello"}); err != nil {
			return err
		}
		if err := c.untilReplyIdle(helloReply); err != nil {
			return err
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
		_ = c.closed()
		return nil
	})
	resumedAll := lastResumed
	for i, err := range errs {
		if err != nil {
			report(browsers[i], fmt.Errorf("after the restart: %w", err))
		}
	}

	// What every session saw, across both processes.
	for _, b := range browsers {
		if err := checkDurableFrames(b); err != nil {
			report(b, err)
		}
	}
	// The cookie identity survived: GET /sessions lists the session.
	_ = forEach(browsers, func(b *durableBrowser) error {
		ids, err := durableListSessions(b, base)
		if err != nil {
			report(b, err)
		} else if !slices.Contains(ids, b.session) {
			report(b, fmt.Errorf("GET /sessions after the restart lists %v, not the browser's session", ids))
		}
		return nil
	})
	fails.flush()
	if testing.Verbose() {
		t.Logf("browser 0's frames ([phase] frame):\n%s", browsers[0].dump())
	}

	if !resumedAll.IsZero() {
		t.Logf("%d sessions: stopped in %v; restart to /healthz %v; /healthz to every page's call delivered again %v; kill to all resumed %v",
			len(browsers), stopped.Sub(killed).Round(time.Millisecond), healthy.Sub(restarted).Round(time.Millisecond),
			resumedAll.Sub(healthy).Round(time.Millisecond), resumedAll.Sub(killed).Round(time.Millisecond))
	}

	// The second process stops cleanly too. (The test's spare keep-alive
	// connections go first: one the transport dialed but never used is a
	// connection without a request to the server, which
	// http.Server.Shutdown waits up to 5s for.)
	transport.CloseIdleConnections()
	termed := time.Now()
	if err := g2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := g2.wait(); err != nil {
		t.Errorf("gateway 2 exited with %v after SIGTERM, want status 0", err)
	}
	t.Logf("gateway 2 stopped on SIGTERM in %v; the subtest took %v", time.Since(termed).Round(time.Millisecond), time.Since(testStart).Round(time.Millisecond))
}

// durableFailures collects what went wrong, per browser, and reports it
// grouped: a hundred browsers failing alike make one line, with the frames
// of the first few.
type durableFailures struct {
	t     *testing.T
	mu    sync.Mutex
	list  []durableFailure
	shown int // browsers whose frames were logged
}

type durableFailure struct {
	b   *durableBrowser
	err error
}

func (f *durableFailures) add(b *durableBrowser, err error) {
	f.mu.Lock()
	f.list = append(f.list, durableFailure{b, err})
	f.mu.Unlock()
}

// variable parts of a failure, so alike failures group.
var durableVariable = regexp.MustCompile(`"[^"]*"|\b[a-z0-9_]{16,}\b|\b[a-z0-9_]*[0-9][a-z0-9_]*\b|\{.*\}`)

func (f *durableFailures) flush() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	groups := map[string][]durableFailure{}
	var order []string
	for _, x := range f.list {
		key := durableVariable.ReplaceAllString(x.err.Error(), "…")
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], x)
	}
	for _, key := range order {
		g := groups[key]
		x := g[0]
		f.t.Errorf("%d of %d browsers: %s\n  e.g. browser %d (session %s): %v", len(g), durableBrowsers, key, x.b.i, x.b.session, x.err)
		if f.shown < 3 {
			f.shown++
			f.t.Logf("browser %d's frames ([phase] frame):\n%s", x.b.i, x.b.dump())
		}
	}
	f.list = nil
}

// helloReply is the demo script's answer to "hello".
const helloReply = "Hello! I'm the demo's scripted model. Ask me \"what's the weather in Tokyo\", \"what time is it\", \"switch to dark theme\", \"light theme\" or \"delete my draft\"."

// checkDurableFrames checks one session's frames across both processes:
// the numbered events run 1..n with no gap or repeat (the second page's
// continue from after), the call settled once, and each reply came once.
func checkDurableFrames(b *durableBrowser) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var problems []string
	want := int64(1)
	finished, replies, hellos, calls2 := 0, 0, 0, 0
	for _, r := range b.frames {
		f := r.f
		if f.numbered() {
			if *f.Seq != want {
				problems = append(problems, fmt.Sprintf("event %s in phase %d has seq %d, want %d", f.Type, r.phase, *f.Seq, want))
				want = *f.Seq
			}
			want++
		}
		role, content := f.chat()
		switch {
		case f.Type == "tool.finished" && f.ID == b.call.f.ID:
			finished++
			if !f.OK {
				problems = append(problems, fmt.Sprintf("the call failed: %s", r.raw))
			}
		case f.Type == "tool.call" && r.phase == 2:
			calls2++
		case f.Type == "message" && role == "assistant" && content == b.reply:
			replies++
		case f.Type == "message" && role == "assistant" && content == helloReply:
			hellos++
		}
	}
	if finished != 1 {
		problems = append(problems, fmt.Sprintf("%d tool.finished for %s, want 1", finished, b.call.f.ID))
	}
	if calls2 != 1 {
		problems = append(problems, fmt.Sprintf("%d tool.call after the restart, want 1", calls2))
	}
	if replies != 1 {
		problems = append(problems, fmt.Sprintf("the reply %q came %d times, want 1", b.reply, replies))
	}
	if hellos != 1 {
		problems = append(problems, fmt.Sprintf("the answer to hello came %d times, want 1", hellos))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// forEach runs f for every browser at once and returns the errors, by index.
func forEach(browsers []*durableBrowser, f func(*durableBrowser) error) []error {
	errs := make([]error, len(browsers))
	var wg sync.WaitGroup
	for i, b := range browsers {
		wg.Go(func() { errs[i] = f(b) })
	}
	wg.Wait()
	return errs
}

func durableListSessions(b *durableBrowser, base string) ([]string, error) {
	resp, err := b.http.Get(base + "/sessions")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Sessions []struct{ ID string }
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /sessions: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("GET /sessions: %w", err)
	}
	ids := make([]string, 0, len(out.Sessions))
	for _, s := range out.Sessions {
		ids = append(ids, s.ID)
	}
	return ids, nil
}

func durableCookies(b *durableBrowser, base string) []*http.Cookie {
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	return b.http.Jar.Cookies(req.URL)
}

// durableSameJSON: a and b are the same JSON value, member order aside.
func durableSameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// durableFreeAddr is a 127.0.0.1 address with a port nothing listens on now.
func durableFreeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(natstest.FreePort(t)))
}

func clipLog(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("\n… (%d more bytes)", len(s)-n)
}
