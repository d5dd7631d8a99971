package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// TestClusterFailover is the cluster's test (make cluster-test): three NATS
// servers clustered on loopback, three gateways on them with replicated
// streams and one worker over HTTP, 100 browsers whose pages reach random
// nodes, each session with a client call (confirm) and a worker call
// (send_email, not idempotent, or lookup_order, idempotent) in flight. Then
// the node that runs half of the sessions is killed (kill -9) and another is
// stopped (SIGTERM): every call settles exactly once (the killed node's
// send_email runs are interrupted, never run twice; its lookup_order runs
// run again; the stopped node's finish before it hands over), no page sees a
// seq gap or repeat, and every session answers its next message. It reports
// the failover time, from the kill to each client call being delivered
// again, and when every session had answered.
//
// It runs six servers in three processes for about 20 seconds, so it runs
// on its own (CLUSTER_TEST=1), not beside the other packages' tests.
func TestClusterFailover(t *testing.T) {
	if os.Getenv("CLUSTER_TEST") != "1" {
		t.Skip("the cluster test runs with CLUSTER_TEST=1 (make cluster-test)")
	}
	urls := natstest.URLs(natstest.Cluster(t, 3))
	bin := buildGatewayBinary(t)
	worker := newClusterWorker(t)
	workerFlags := worker.flags(t)
	names := []string{"node-a", "node-b", "node-c"}
	procs := map[string]*gatewayProc{}
	bases := map[string]string{}
	for _, name := range names {
		addr := durableFreeAddr(t)
		procs[name] = startGatewayProc(t, name, bin, addr, t.TempDir(), append([]string{
			"--nats-url", strings.Join(urls, ","), "--nats-replicas", "3", "--node-id", name,
			"--lease-ttl", "5s", "--ping-interval", "1s"}, workerFlags...)...)
		bases[name] = "http://" + addr
	}
	for _, name := range names {
		// The first start makes the replicated streams: it takes a while.
		procs[name].waitHealthyFor(bases[name], time.Minute)
		// The test's 5 s leases, shorter than a cluster should run with
		// (it kills no NATS server): each node says what they risk.
		if log := procs[name].stderr.String(); !strings.Contains(log, "the session leases last less than 10 s") {
			t.Errorf("%s did not warn of its 5 s leases on a cluster:\n%s", name, log)
		}
	}

	// Calls per second: the cluster, pages spread over its three nodes,
	// beside one gateway on its embedded store, on this one machine.
	const loadSessions, loadTurns = 50, 5
	clusterRate := callRate(t, []string{bases["node-a"], bases["node-b"], bases["node-c"]}, loadSessions, loadTurns)
	single := durableFreeAddr(t)
	one := startGatewayProc(t, "single", bin, single, t.TempDir(), workerFlags...)
	one.waitHealthy("http://" + single)
	singleRate := callRate(t, []string{"http://" + single}, loadSessions, loadTurns)
	_ = one.cmd.Process.Signal(syscall.SIGTERM)
	_ = one.wait()
	t.Logf("client calls settled per second, %d sessions of %d turns: the cluster (3 gateways, 3 NATS servers, R3) %.0f/s; one gateway on its embedded store %.0f/s (all on this 2-core machine)",
		loadSessions, loadTurns, clusterRate, singleRate)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = durableBrowsers
	chats := make([]*clusterChat, n)
	rnd := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range chats {
		jar, _ := cookiejar.New(nil)
		// Half the sessions run on node A, the one the test kills.
		owner := "node-a"
		if i%2 == 1 {
			owner = names[1+rnd.IntN(2)]
		}
		c := &clusterChat{br: &durableBrowser{i: i, http: &http.Client{Jar: jar, Timeout: hang}}, owner: owner, email: i%4 < 2}
		c.node = names[rnd.IntN(3)] // the page of the call: often another node, so relayed
		chats[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Open the session on its owner, then leave that page for one
			// on a random node that asks for the call.
			first, err := c.br.dial(ctx, bases[c.owner], 1)
			if err != nil {
				errs <- err
				return
			}
			_ = first.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
			opened, err := first.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })
			if err != nil {
				errs <- fmt.Errorf("browser %d: %w", i, err)
				return
			}
			c.br.session = opened.f.Session
			_ = first.ws.CloseNow()
			if c.page, err = c.br.dial(ctx, bases[c.node], 1); err != nil {
				errs <- err
				return
			}
			// after 0: the first page was closed before its replay was read.
			_ = c.page.send(ctx, map[string]any{"type": "session.open", "session": c.br.session, "after": 0, "tools": durableTools})
			ask := askLookup
			if c.email {
				ask = askEmail
			}
			_ = c.page.send(ctx, map[string]any{"type": "message", "content": ask})
			if c.call, err = c.page.until("tool.call", func(f wireFrame) bool { return f.Type == "tool.call" }); err != nil {
				errs <- fmt.Errorf("browser %d (owner %s, page on %s): %w\n%s", i, c.owner, c.node, err, c.br.dump())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every session's worker call is running: the worker holds them.
	for range n {
		select {
		case <-worker.arrived:
		case <-time.After(hang):
			t.Fatal("the worker calls did not all start")
		}
	}

	// The disruption: kill -9 node A, then stop node B (a deploy), whose
	// worker calls then answer while it drains.
	killed := time.Now()
	_ = procs["node-a"].cmd.Process.Kill()
	_ = procs["node-a"].wait()
	if err := procs["node-b"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	worker.letGo()
	if err := procs["node-b"].wait(); err != nil {
		t.Fatalf("node B exited with %v", err)
	}

	// Every page carries on, on node C: in place when it was connected to
	// C, else it reconnects there with after.
	errs = make(chan error, n)
	for _, c := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				page := c.page
				if c.node != "node-c" {
					if err := page.closed(); err == nil {
						return fmt.Errorf("the page on %s stayed open after its node stopped", c.node)
					}
					var last int64
					for _, r := range c.br.recorded() {
						if r.f.numbered() {
							last = max(last, *r.f.Seq)
						}
					}
					var err error
					deadline := time.Now().Add(time.Minute)
					for {
						if page, err = c.br.dial(ctx, bases["node-c"], 2); err != nil {
							return err
						}
						_ = page.send(ctx, map[string]any{"type": "session.open", "session": c.br.session, "after": last, "tools": durableTools})
						if _, err = page.until("session.opened on node C", func(f wireFrame) bool { return f.Type == "session.opened" }); err == nil {
							break
						}
						if time.Now().After(deadline) {
							return err
						}
						time.Sleep(200 * time.Millisecond)
					}
				}
				if c.node != "node-c" || c.owner != "node-c" { // untouched otherwise: the call stays where it was
					again, err := page.until("the call again", func(f wireFrame) bool { return f.Type == "tool.call" && f.ID == c.call.f.ID })
					if err != nil {
						return err
					}
					if again.f.Attempt != c.call.f.Attempt || again.f.Deadline != c.call.f.Deadline {
						return fmt.Errorf("delivered again as %s, was %s", again.raw, c.call.raw)
					}
					c.resumed = time.Since(killed)
				}
				_ = page.send(ctx, map[string]any{"type": "tool.result", "id": c.call.f.ID, "attempt": c.call.f.Attempt, "result": map[string]bool{"approved": true}})
				if err := page.untilReplyIdle("Okay, I deleted your draft. " + c.wantWorker().reply); err != nil {
					return err
				}
				_ = page.send(ctx, map[string]any{"type": "message", "content": "hello"})
				_, err := page.until("the next answer", func(f wireFrame) bool {
					role, content := f.chat()
					return f.Type == "message" && role == "assistant" && strings.HasPrefix(content, "Hello")
				})
				return err
			}()
			if err != nil {
				errs <- fmt.Errorf("browser %d (owner %s, page on %s): %w\n%s", c.br.i, c.owner, c.node, err, c.br.dump())
			}
		}()
	}
	wg.Wait()
	settledAll := time.Since(killed)
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sessions did not carry on\nnode C's log:\n%s", failed, n, clipLog(procs["node-c"].stderr.String(), 4000))
	}
	var times []time.Duration
	for _, c := range chats {
		if c.resumed > 0 {
			times = append(times, c.resumed)
		}
		if err := checkClusterFrames(c.br); err != nil {
			t.Errorf("browser %d: %v\n%s", c.br.i, err, c.br.dump())
		}
		if err := c.checkWorkerCall(worker); err != nil {
			t.Errorf("browser %d (owner %s): %v\n%s", c.br.i, c.owner, err, c.br.dump())
		}
	}
	slices.Sort(times)
	t.Logf("failover of %d sessions touched by the kill and the stop, to their call delivered again: p50 %v, p99 %v, max %v (lease 5s); all %d calls settled, and every session answered its next message, %v after the kill",
		len(times), times[len(times)/2].Round(time.Millisecond), times[len(times)*99/100].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond),
		n, settledAll.Round(time.Millisecond))
}

// clusterChat is one browser of the cluster test and its session.
type clusterChat struct {
	br      *durableBrowser
	owner   string // the node the session was opened on: its lease holder
	page    *pageConn
	node    string // the node the page is connected to
	email   bool   // send_email beside the confirm, else lookup_order
	call    recFrame
	resumed time.Duration
}

// workerOutcome is what a chat's worker call must come to.
type workerOutcome struct {
	tool  string
	runs  int    // times the worker is asked to run it
	code  string // tool.finished's code; "" for a result
	reply string // the model's sentence about it
}

// wantWorker: the killed node's send_email was running when it died, so it
// is interrupted, not run twice; its lookup_order runs again. The stopped
// node's calls finished while it drained, the others' ran undisturbed.
func (c *clusterChat) wantWorker() workerOutcome {
	killed := c.owner == "node-a"
	switch {
	case c.email && killed:
		return workerOutcome{"send_email", 1, "interrupted", emailUnsure}
	case c.email:
		return workerOutcome{"send_email", 1, "", emailSent}
	case killed:
		return workerOutcome{"lookup_order", 2, "", orderSeen}
	default:
		return workerOutcome{"lookup_order", 1, "", orderSeen}
	}
}

// checkWorkerCall checks the chat's worker call against wantWorker.
func (c *clusterChat) checkWorkerCall(w *clusterWorker) error {
	want := c.wantWorker()
	var started, finished *wireFrame
	for _, r := range c.br.recorded() {
		switch {
		case r.f.Type == "tool.started" && r.f.Name == want.tool:
			started = &r.f
		case r.f.Type == "tool.finished" && started != nil && r.f.ID == started.ID:
			finished = &r.f
		}
	}
	switch {
	case started == nil || finished == nil:
		return fmt.Errorf("no %s started and finished", want.tool)
	case finished.OK != (want.code == "") || finished.Code != want.code:
		return fmt.Errorf("%s finished ok=%v code %q, want code %q", want.tool, finished.OK, finished.Code, want.code)
	}
	if runs := w.runsOf(c.br.session, started.ID); runs != want.runs {
		return fmt.Errorf("the worker ran %s %d times, want %d", want.tool, runs, want.runs)
	}
	return nil
}

// checkClusterFrames: the numbered events a browser's pages saw, replays
// aside, run 1..n with no gap, and its two calls settled once each.
func checkClusterFrames(b *durableBrowser) error {
	seen := map[int64]string{}
	finished := map[string]int{}
	var max int64
	for _, r := range b.recorded() {
		if !r.f.numbered() {
			continue
		}
		s := *r.f.Seq
		if prev, ok := seen[s]; ok {
			if prev != string(r.raw) {
				return fmt.Errorf("seq %d is %s and %s", s, prev, r.raw)
			}
			continue // a replay
		}
		seen[s] = string(r.raw)
		if s > max {
			max = s
		}
		if r.f.Type == "tool.finished" {
			finished[r.f.ID]++
		}
	}
	for s := int64(1); s <= max; s++ {
		if _, ok := seen[s]; !ok {
			return fmt.Errorf("seq %d never reached a page (last %d)", s, max)
		}
	}
	if len(finished) != 2 {
		return fmt.Errorf("%d calls finished, want 2", len(finished))
	}
	for id, n := range finished {
		if n != 1 {
			return fmt.Errorf("call %s finished %d times", id, n)
		}
	}
	return nil
}

// callRate runs sessions browsers, each on a random one of bases, each
// asking "what time is it" turns times in a row and answering the client
// call at once; it returns the client calls settled per second.
func callRate(t *testing.T, bases []string, sessions, turns int) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	start := time.Now()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jar, _ := cookiejar.New(nil)
			br := &durableBrowser{i: i, http: &http.Client{Jar: jar, Timeout: hang}}
			page, err := br.dial(ctx, bases[i%len(bases)], 1)
			if err != nil {
				errs <- err
				return
			}
			defer page.ws.CloseNow()
			_ = page.send(ctx, map[string]any{"type": "session.open", "tools": durableTools})
			if _, err := page.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" }); err != nil {
				errs <- err
				return
			}
			for range turns {
				_ = page.send(ctx, map[string]any{"type": "message", "content": "what time is it"})
				call, err := page.until("tool.call", func(f wireFrame) bool { return f.Type == "tool.call" })
				if err != nil {
					errs <- err
					return
				}
				_ = page.send(ctx, map[string]any{"type": "tool.result", "id": call.f.ID, "attempt": call.f.Attempt,
					"result": map[string]string{"time": "12:00", "timeZone": "Asia/Tokyo"}})
				if err := page.untilReplyIdle("Your page says it's 12:00 in Asia/Tokyo."); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(sessions*turns) / time.Since(start).Seconds()
}
