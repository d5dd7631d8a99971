package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clienttools/gateway/runners"
)

// Targets from the issue (docs/benchmarks.md), on this machine. The round
// trip ratio and the throughput depend on the store: see targetsFor.
const (
	// Memory per idle connected page: at most the echo floor's per
	// connection plus this.
	targetIdleOverFloor = 4 << 10
	// Goroutines per idle connected page: its reader and its session's.
	targetIdleGoroutines = 2
	// An idle session with no page: unloaded, no goroutine, under this.
	targetParkedBytes = 1 << 10
	// Streaming delay p50: at most the echo's one way (half its round trip
	// p50) plus this.
	targetStreamOverOneWay = 10 * time.Microsecond
	// Against the AI SDK: at least this many times its round trips per
	// second, and a p50 at most its median divided by targetPeerP50.
	targetPeerRPS = 36
	targetPeerP50 = 20
	// idleWarm connections are open before the idle phase's first reading,
	// so pools and the runtime are warm and both readings include them.
	idleWarm = 100
	// parkedUnload is the gateway's Unload in the parked phase: how long a
	// session with no page stays in memory.
	parkedUnload = time.Second
	// parkedPerBrowser sessions share a cookie in the parked phase.
	parkedPerBrowser = 30
	// storeCacheExpiry is how long the embedded NATS server keeps a
	// stream's recently written blocks in memory after their last use
	// (its file store's cache expiry, 10 s, and a margin). The idle and
	// parked phases read memory after it: those caches are the store's
	// last seconds of writes, block buffers of up to the server's block
	// size (8 MiB) per stream, not what a page or a session holds.
	storeCacheExpiry = 12 * time.Second
)

// storeTargets are the targets that differ by store.
type storeTargets struct {
	ratioP50    float64 // client-tool round trip p50 / echo round trip p50
	callsPerSec float64 // at 1,000 sessions, one call a turn
}

func targetsFor(store string) storeTargets {
	if store == "jetstream" {
		return storeTargets{ratioP50: 3, callsPerSec: 10000}
	}
	return storeTargets{ratioP50: 2, callsPerSec: 20000}
}

// results are the figures of one store's run the targets are checked
// against.
type results struct {
	store              string
	echoRTT, toolRTT   summary
	throughput         float64
	throughputSessions int
	callsPerTurn       int
	cpuPerCall         time.Duration
	streamDelay        summary
	streamFloor        summary // the echo server's stream
	idleRSS            float64 // gateway bytes per idle page
	echoIdleRSS        float64 // echo server bytes per idle connection
	idleSessions       int
	idleGoroutines     float64 // gateway goroutines per idle page
	parked             perConn // per idle session with no page, unloaded
	parkedMore         perConn // the same, for a second batch as large
	parkedSessions     int
}

// report prints as the run goes.
type report struct{ w io.Writer }

func (r report) printf(format string, args ...any) { fmt.Fprintf(r.w, format+"\n", args...) }

// measure runs the AI SDK's harness when present, then the phases in order
// on each store, and prints the report with the targets of each store.
func measure(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	need := uint64(max(cfg.idle+idleWarm, cfg.sessions, cfg.streamSessions)) + fileHeadroom
	limit, err := raiseFileLimit(max(need, maxFiles))
	if limit < need {
		return fmt.Errorf("RLIMIT_NOFILE is %d, this run needs %d (raise the hard limit: ulimit -Hn): %v", limit, need, err)
	}
	r := report{w: stdout}
	r.printf("gatewaybench %s", strings.Join(os.Args[1:], " "))
	r.printf("machine: %s", machine())
	r.printf("load average at start: %s (1, 5, 15 min; other processes on these CPUs make every figure worse)", loadAverage())
	var errs []error
	peer, peerNote := peerRun(ctx, cfg, r, stderr)
	stores := cfg.stores
	if cfg.url != "" {
		stores = stores[:1]
	}
	var all []results
	for i, store := range stores {
		scfg := cfg
		scfg.store = store
		if i > 0 {
			scfg.cpuProfile, scfg.memProfile = perStore(cfg.cpuProfile, store), perStore(cfg.memProfile, store)
		}
		r.printf("")
		if cfg.url != "" {
			r.printf("gateway: %s (running; memory from its /bench/stats or -pid)", cfg.url)
		} else {
			r.printf("== store %s: gateway child process (-serve gateway -store %s), a fresh one per phase; floor: child process (-serve echo)", store, store)
		}
		res := results{store: store}
		for _, phase := range cfg.phases {
			r.printf("")
			var err error
			switch phase {
			case "latency":
				err = latencyPhase(ctx, scfg, r, &res, stderr)
			case "throughput":
				err = throughputPhase(ctx, scfg, r, &res, stderr)
			case "stream":
				err = streamPhase(ctx, scfg, r, &res, stderr)
			case "idle":
				err = idlePhase(ctx, scfg, r, &res, stderr)
			case "parked":
				err = parkedPhase(ctx, scfg, r, &res, stderr)
			}
			if err != nil {
				r.printf("%s: FAILED: %v", phase, err)
				errs = append(errs, fmt.Errorf("%s, %s store: %w", phase, store, err))
				if ctx.Err() != nil {
					break
				}
			}
		}
		r.printf("")
		r.printf("load average after the %s store: %s", store, loadAverage())
		all = append(all, res)
	}
	r.printf("")
	for _, res := range all {
		printTargets(r, res, peer, peerNote)
	}
	return errors.Join(errs...)
}

// perStore names the profile of a store after the first: FILE-STORE.EXT.
func perStore(path, store string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + store + ext
}

// peerRun runs the AI SDK harness once, when -peer-aisdk names it, and
// prints its figures; the note says why there are none.
func peerRun(ctx context.Context, cfg config, r report, stderr io.Writer) (*peerResult, string) {
	if cfg.peerAISDK == "" {
		return nil, "not run (-peer-aisdk empty)"
	}
	r.printf("")
	r.printf("peer: the Vercel AI SDK's client-tool round trip (harness %s, copied to a temporary folder; run.sh's output follows on stderr)", cfg.peerAISDK)
	p, err := runPeerAISDK(ctx, cfg.peerAISDK, stderr)
	if errors.Is(err, errPeerAbsent) {
		note := fmt.Sprintf("not run: no harness at %s (-peer-aisdk)", cfg.peerAISDK)
		r.printf("  %s", note)
		return nil, note
	}
	if err != nil {
		r.printf("  FAILED: %v", err)
		return nil, "not run: the harness failed"
	}
	r.printf("  %s", p.line)
	r.printf("  sequential median %s, p99 %s; %.0f round trips/s at 1 client, %.0f at 16", fmtDur(p.median), fmtDur(p.p99), p.rpsSeq, p.rpsC16)
	r.printf("  load average after it: %s", loadAverage())
	return &p, ""
}

// latencyPhase: one connection, sequential, no other load.
func latencyPhase(ctx context.Context, cfg config, r report, res *results, stderr io.Writer) error {
	warm := max(cfg.turns/10, 100)
	echo, err := withTarget(ctx, cfg, serveEcho, stderr, func(t *target, d *dialer) (*recorder, error) {
		b, err := d.openEcho(ctx)
		if err != nil {
			return nil, err
		}
		defer b.close()
		rec := &recorder{}
		for i := 0; i < warm+cfg.turns; i++ {
			if i == warm {
				rec = &recorder{}
			}
			if err := b.echo(ctx, rec); err != nil {
				return nil, err
			}
		}
		return rec, nil
	})
	if err != nil {
		return fmt.Errorf("echo floor: %w", err)
	}
	gw, err := withTarget(ctx, cfg, serveGateway, stderr, func(t *target, d *dialer) (*recorder, error) {
		b, err := d.openSession(ctx)
		if err != nil {
			return nil, err
		}
		c := &chat{d: d, b: b, sessionTurns: cfg.sessionTurns}
		defer func() {
			if c.b != nil {
				c.b.close()
			}
		}()
		rec := &recorder{}
		for i := 0; i < warm+cfg.turns; i++ {
			if i == warm {
				if err := rec.err(); err != nil {
					return nil, err
				}
				rec = &recorder{}
			}
			if err := c.turn(ctx, userTurn(cfg, i), rec); err != nil {
				return nil, err
			}
			if i == 0 && len(rec.rtts) == 0 {
				return nil, errNoSamples // the first turn called no client tool
			}
		}
		return rec, rec.err()
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if len(gw.rtts) == 0 {
		return errNoSamples
	}
	res.echoRTT, res.toolRTT = echo.rtts.summary(), gw.rtts.summary()
	r.printf("latency: 1 connection at a time, sequential, %d turns of %d client call(s) after %d warm-up; %s",
		cfg.turns, cfg.callsPerTurn, warm, sessionTurnsText(cfg.sessionTurns))
	r.printf("  echo round trip (floor)            %s", res.echoRTT)
	r.printf("  client-tool round trip             %s", res.toolRTT)
	r.printf("    (tool.call arrival to tool.finished arrival, at the browser)")
	r.printf("  turn (message sent to session.idle) %s", gw.turns.summary())
	r.printf("  ratio gateway/echo round trip: p50 %.2fx  p99 %.2fx",
		ratio(res.toolRTT.p50, res.echoRTT.p50), ratio(res.toolRTT.p99, res.echoRTT.p99))
	return nil
}

// throughputPhase: cfg.sessions browsers in closed loop, gateway then the
// floor at the same connection count.
func throughputPhase(ctx context.Context, cfg config, r report, res *results, stderr io.Writer) error {
	r.printf("throughput: %d concurrent sessions in closed loop, %d client call(s) a turn, %s window after %s warm-up; %s",
		cfg.sessions, cfg.callsPerTurn, cfg.duration, cfg.warmup, sessionTurnsText(cfg.sessionTurns))
	gw, err := loadRun(ctx, cfg, serveGateway, stderr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if len(gw.rec.rtts) == 0 {
		return errNoSamples
	}
	res.throughput = float64(len(gw.rec.rtts)) / cfg.duration.Seconds()
	res.throughputSessions, res.callsPerTurn = cfg.sessions, cfg.callsPerTurn
	r.printf("  gateway: %.0f client tool calls settled/s (%.0f turns/s)", res.throughput, float64(len(gw.rec.turns))/cfg.duration.Seconds())
	r.printf("    client-tool round trip           %s", gw.rec.rtts.summary())
	r.printf("    turn                             %s", gw.rec.turns.summary())
	if gw.rec.moved > 0 {
		r.printf("    sessions closed with 4001 (the gateway lost their lease) and reopened: %d; their turns are lost", gw.rec.moved)
	}
	if cfg.sessionTurns == 0 {
		r.printf("    turns per session by the end: %.0f on average (the engine copies the whole transcript into each model request)",
			float64(gw.rec.total)/float64(cfg.sessions))
	}
	r.printf("    CPU: gateway %.2f cores, browsers %.2f cores, other processes %.2f cores", gw.serverCores, gw.clientCores, gw.otherCores)
	res.cpuPerCall = perOp(gw.serverCores, res.throughput)
	r.printf("    gateway CPU per settled call: %s; browsers' %s", fmtDur(res.cpuPerCall), fmtDur(perOp(gw.clientCores, res.throughput)))
	if cfg.cpuProfile != "" && cfg.url == "" {
		r.printf("    CPU profile of the gateway over the window: %s", cfg.cpuProfile)
	}
	echo, err := loadRun(ctx, cfg, serveEcho, stderr)
	if err != nil {
		return fmt.Errorf("echo floor: %w", err)
	}
	echoRate := float64(len(echo.rec.rtts)) / cfg.duration.Seconds()
	r.printf("  echo floor: %.0f round trips/s", echoRate)
	r.printf("    echo round trip                  %s", echo.rec.rtts.summary())
	r.printf("    CPU: echo server %.2f cores, clients %.2f cores, other processes %.2f cores", echo.serverCores, echo.clientCores, echo.otherCores)
	r.printf("    echo server CPU per round trip: %s; clients' %s", fmtDur(perOp(echo.serverCores, echoRate)), fmtDur(perOp(echo.clientCores, echoRate)))
	r.printf("  ratio gateway/echo round trip under load: p50 %.2fx  p99 %.2fx",
		ratio(gw.rec.rtts.summary().p50, echo.rec.rtts.summary().p50), ratio(gw.rec.rtts.summary().p99, echo.rec.rtts.summary().p99))
	return gw.rec.err()
}

type loadResult struct {
	rec                      *recorder
	serverCores, clientCores float64
	otherCores               float64 // every other process of the machine
}

// loadRun opens cfg.sessions connections to a fresh server of kind and runs
// them in closed loop until the window ends.
func loadRun(ctx context.Context, cfg config, kind string, stderr io.Writer) (loadResult, error) {
	var out loadResult
	rec, err := withTarget(ctx, cfg, kind, stderr, func(t *target, d *dialer) (*recorder, error) {
		ctx, cancel := context.WithTimeout(ctx, cfg.warmup+cfg.duration+time.Minute)
		defer cancel()
		open := d.openSession
		if kind == serveEcho {
			open = d.openEcho
		}
		bs, err := openMany(ctx, cfg.sessions, cfg.parallel, open)
		if err != nil {
			return nil, err
		}
		defer closeMany(bs, cfg.parallel)

		start := time.Now()
		from := start.Add(cfg.warmup)
		to := from.Add(cfg.duration)
		recs := make([]*recorder, len(bs))
		errs := make([]error, len(bs))
		var wg sync.WaitGroup
		for i, b := range bs {
			recs[i] = &recorder{from: from, to: to}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &chat{d: d, b: b, sessionTurns: cfg.sessionTurns}
				defer func() { bs[i] = c.b }() // closeMany closes the current one
				for n := 0; time.Now().Before(to) && ctx.Err() == nil; n++ {
					var err error
					if kind == serveEcho {
						err = b.echo(ctx, recs[i])
					} else {
						err = c.turn(ctx, userTurn(cfg, n), recs[i])
					}
					if err != nil {
						errs[i] = err
						return
					}
				}
			}()
		}
		window := func() error {
			if err := sleepUntil(ctx, from); err != nil {
				return err
			}
			s0, err := t.stats(ctx, false)
			if err != nil {
				return err
			}
			c0, _ := readStats(false)
			m0, _ := machineBusy()
			t0 := time.Now()
			if kind == serveGateway && cfg.cpuProfile != "" && cfg.url == "" {
				if err := t.control(ctx, "/bench/cpuprofile/start"); err != nil {
					return err
				}
				defer t.control(context.WithoutCancel(ctx), "/bench/cpuprofile/stop")
			}
			if err := sleepUntil(ctx, to); err != nil {
				return err
			}
			s1, err := t.stats(ctx, false)
			if err != nil {
				return err
			}
			c1, _ := readStats(false)
			m1, _ := machineBusy()
			secs := time.Since(t0).Seconds()
			out.serverCores = (s1.CPU - s0.CPU) / secs
			out.clientCores = (c1.CPU - c0.CPU) / secs
			out.otherCores = (m1-m0)/secs - out.serverCores - out.clientCores
			return nil
		}()
		wg.Wait()
		all := &recorder{}
		for _, rec := range recs {
			all.merge(rec)
		}
		for _, err := range errs {
			if err != nil {
				return all, fmt.Errorf("a %s connection failed: %w", kind, err)
			}
		}
		return all, window
	})
	out.rec = rec
	return out, err
}

// streamPhase: browsers ask for stamped deltas; the delay is arrival minus
// stamp, both CLOCK_MONOTONIC.
func streamPhase(ctx context.Context, cfg config, r report, res *results, stderr io.Writer) error {
	warmDeltas := max(cfg.streamDeltas/10, 10)
	content := fmt.Sprintf("%s%d %s", streamPrefix, cfg.streamDeltas, cfg.streamInterval)
	warm := fmt.Sprintf("%s%d %s", streamPrefix, warmDeltas, cfg.streamInterval)
	floor, err := streamRun(ctx, cfg, serveEcho, stderr, func(ctx context.Context, b *browser, rec *recorder) error {
		if err := b.stream(ctx, warmDeltas, cfg.streamInterval, &recorder{}); err != nil {
			return err
		}
		return b.stream(ctx, cfg.streamDeltas, cfg.streamInterval, rec)
	})
	if err != nil {
		return fmt.Errorf("echo floor: %w", err)
	}
	rec, err := streamRun(ctx, cfg, serveGateway, stderr, func(ctx context.Context, b *browser, rec *recorder) error {
		if err := b.turn(ctx, warm, &recorder{}); err != nil {
			return err
		}
		return b.turn(ctx, content, rec)
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	res.streamFloor, res.streamDelay = floor.delays.summary(), rec.delays.summary()
	r.printf("stream: %d session(s), %d deltas each, %s apart", cfg.streamSessions, cfg.streamDeltas, cfg.streamInterval)
	r.printf("  echo server's stream, one way (floor) %s", res.streamFloor)
	r.printf("  delta delay, engine to browser       %s", res.streamDelay)
	r.printf("    (stamp read just before the frame leaves the echo server / the model gives the delta, to its arrival at the browser)")
	r.printf("  gateway minus floor: p50 %s  p99 %s", fmtDur(res.streamDelay.p50-res.streamFloor.p50), fmtDur(res.streamDelay.p99-res.streamFloor.p99))
	if res.echoRTT.n > 0 {
		half := res.echoRTT.p50 / 2
		r.printf("  the echo's round trip halved, for comparison: %s (a ping-pong keeps both processes awake; frames %s apart find them asleep)",
			fmtDur(half), cfg.streamInterval)
	}
	r.printf("  (each delay includes about one CLOCK_MONOTONIC read: %s)", fmtDur(monoCost()))
	return nil
}

// streamRun opens cfg.streamSessions connections to a target of kind and
// runs each one's stream at once, merging what they recorded.
func streamRun(ctx context.Context, cfg config, kind string, stderr io.Writer, stream func(context.Context, *browser, *recorder) error) (*recorder, error) {
	return withTarget(ctx, cfg, kind, stderr, func(t *target, d *dialer) (*recorder, error) {
		open := d.openSession
		if kind == serveEcho {
			open = d.openEcho
		}
		bs, err := openMany(ctx, cfg.streamSessions, cfg.parallel, open)
		if err != nil {
			return nil, err
		}
		defer closeMany(bs, cfg.parallel)
		recs := make([]*recorder, len(bs))
		errs := make([]error, len(bs))
		var wg sync.WaitGroup
		for i, b := range bs {
			recs[i] = &recorder{stamped: true}
			wg.Go(func() { errs[i] = stream(ctx, b, recs[i]) })
		}
		wg.Wait()
		all := &recorder{}
		for i := range bs {
			if errs[i] != nil {
				return nil, errs[i]
			}
			all.merge(recs[i])
		}
		return all, all.err()
	})
}

// idlePhase: memory per idle connected session, gateway then the floor.
func idlePhase(ctx context.Context, cfg config, r report, res *results, stderr io.Writer) error {
	r.printf("idle: %d sessions connected and idle (after %d warm), memory after GC + FreeOSMemory, per session", cfg.idle, idleWarm)
	row := func(name string, p perConn) {
		g := "n/a"
		if !math.IsNaN(p.goroutines) {
			g = fmt.Sprintf("%.2f", p.goroutines)
		}
		r.printf("  %-36s %10s %10s %10s %10s", name, fmtBytes(p.rss), fmtBytes(p.heap), fmtBytes(p.stack), g)
	}
	r.printf("  %-36s %10s %10s %10s %10s", "", "RSS", "HeapInuse", "StackInuse", "goroutines")
	gw, self, err := idleRun(ctx, cfg, serveGateway, stderr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	res.idleRSS, res.idleSessions, res.idleGoroutines = gw.rss, cfg.idle, gw.goroutines
	row("gateway (its process)", gw)
	if math.IsNaN(gw.heap) {
		r.printf("  (the gateway has no /bench/stats: its RSS is from /proc without a forced GC, so it counts garbage too)")
	}
	echo, echoSelf, err := idleRun(ctx, cfg, serveEcho, stderr)
	if err != nil {
		return fmt.Errorf("echo floor: %w", err)
	}
	res.echoIdleRSS = echo.rss
	row("echo server (floor)", echo)
	row("gateway minus floor", perConn{rss: gw.rss - echo.rss, heap: gw.heap - echo.heap, live: gw.live - echo.live, stack: gw.stack - echo.stack, goroutines: gw.goroutines - echo.goroutines})
	row("browsers, gateway run (this process)", self)
	row("clients, echo run (this process)", echoSelf)
	if cfg.memProfile != "" && cfg.url == "" {
		r.printf("  heap profile of the gateway with %d sessions connected: %s", cfg.idle+idleWarm, cfg.memProfile)
	}
	return nil
}

// perConn is a memory delta divided by the connections added.
type perConn struct{ rss, heap, live, stack, goroutines float64 }

func perConnection(before, after procStats, n int) perConn {
	f := float64(n)
	if !after.Runtime {
		return perConn{rss: float64(after.RSS-before.RSS) / f, heap: math.NaN(), live: math.NaN(), stack: math.NaN(), goroutines: math.NaN()}
	}
	return perConn{
		rss:        float64(after.RSS-before.RSS) / f,
		heap:       float64(after.HeapInuse-before.HeapInuse) / f,
		live:       float64(after.HeapAlloc-before.HeapAlloc) / f,
		stack:      float64(after.StackInuse-before.StackInuse) / f,
		goroutines: float64(after.Goroutines-before.Goroutines) / f,
	}
}

// idleRun connects idleWarm, reads, connects cfg.idle more, reads, and
// returns the server's and this process's cost per connection.
func idleRun(ctx context.Context, cfg config, kind string, stderr io.Writer) (server, self perConn, err error) {
	_, err = withTarget(ctx, cfg, kind, stderr, func(t *target, d *dialer) (*recorder, error) {
		open := d.openSession
		if kind == serveEcho {
			open = d.openEcho
		}
		ctx, cancel := context.WithCancel(ctx)
		var readers sync.WaitGroup
		var all []*browser
		defer func() {
			closeMany(all, cfg.parallel)
			cancel()
			readers.Wait()
		}()
		connect := func(n int) error {
			bs, err := openMany(ctx, n, cfg.parallel, open)
			if err != nil {
				return err
			}
			all = append(all, bs...)
			for _, b := range bs {
				readers.Add(1)
				go func() { defer readers.Done(); b.drain(ctx) }()
			}
			if kind == serveGateway {
				return t.waitConnections(ctx, len(all))
			}
			return nil
		}
		settle := func() (procStats, procStats, error) {
			// Let attaches and first events land, the gateway's free
			// runners (package runners) end after their idle time, and
			// the store's caches of the last writes expire: a stream's
			// block buffers are the store's, whatever the number of
			// pages, and would be counted against the second reading's
			// pages only (as in the parked phase).
			wait := runners.DefaultIdle + 500*time.Millisecond
			if cfg.store == "jetstream" && kind == serveGateway {
				wait = max(wait, storeCacheExpiry)
			}
			time.Sleep(wait)
			s, err := t.stats(ctx, true)
			if err != nil {
				return s, procStats{}, err
			}
			c, err := readStats(true)
			return s, c, err
		}
		if err := connect(idleWarm); err != nil {
			return nil, err
		}
		s0, c0, err := settle()
		if err != nil {
			return nil, err
		}
		if err := connect(cfg.idle); err != nil {
			return nil, err
		}
		s1, c1, err := settle()
		if err != nil {
			return nil, err
		}
		if kind == serveGateway && cfg.memProfile != "" && cfg.url == "" {
			if err := t.control(ctx, "/bench/heapprofile"); err != nil {
				return nil, err
			}
		}
		server, self = perConnection(s0, s1, cfg.idle), perConnection(c0, c1, cfg.idle)
		return nil, nil
	})
	return server, self, err
}

// withTarget starts a fresh server of kind, runs f against it and stops it.
func withTarget(ctx context.Context, cfg config, kind string, stderr io.Writer, f func(*target, *dialer) (*recorder, error)) (*recorder, error) {
	t, err := startTarget(ctx, cfg, kind, stderr)
	if err != nil {
		return nil, err
	}
	d := newDialer(t.base, cfg.parallel, cfg.deflate)
	rec, err := f(t, d)
	d.close()
	return rec, errors.Join(err, t.stop())
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// userTurn is the n-th user message: the model calls echo
// cfg.callsPerTurn times on it.
func userTurn(cfg config, n int) string {
	if cfg.callsPerTurn == 1 {
		return "echo " + strconv.Itoa(n)
	}
	return fmt.Sprintf("calls %d echo %d", cfg.callsPerTurn, n)
}

func sessionTurnsText(n int) string {
	if n == 0 {
		return "one session throughout"
	}
	return fmt.Sprintf("a new session every %d turns", n)
}

// perOp is the CPU time per operation of cores busy at rate ops/s.
func perOp(cores, rate float64) time.Duration {
	if rate == 0 {
		return 0
	}
	return time.Duration(cores / rate * float64(time.Second))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// printTargets compares one store's figures with the targets.
func printTargets(r report, res results, peer *peerResult, peerNote string) {
	t := targetsFor(res.store)
	r.printf("targets, %s store:", res.store)
	check := func(name string, ran, ok bool, got, want string) {
		switch {
		case !ran:
			r.printf("  %-62s not measured", name)
		case ok:
			r.printf("  %-62s met     (%s; target %s)", name, got, want)
		default:
			r.printf("  %-62s MISSED  (%s; target %s)", name, got, want)
		}
	}
	rt := ratio(res.toolRTT.p50, res.echoRTT.p50)
	check("client-tool round trip p50 / echo round trip p50", res.toolRTT.n > 0 && res.echoRTT.n > 0, rt <= t.ratioP50,
		fmt.Sprintf("%.2fx: %s / %s", rt, fmtDur(res.toolRTT.p50), fmtDur(res.echoRTT.p50)), fmt.Sprintf("<= %.0fx", t.ratioP50))
	check(fmt.Sprintf("client calls settled/s, %d sessions, %d call(s) a turn", res.throughputSessions, res.callsPerTurn), res.throughput > 0,
		res.throughput >= t.callsPerSec, fmt.Sprintf("%.0f/s, %.2fx the target; %s of gateway CPU per call", res.throughput, res.throughput/t.callsPerSec, fmtDur(res.cpuPerCall)),
		fmt.Sprintf(">= %.0f/s", t.callsPerSec))
	floor := res.echoIdleRSS + targetIdleOverFloor
	check(fmt.Sprintf("memory per idle connected page at %d pages (RSS)", res.idleSessions), res.idleSessions > 0,
		res.idleRSS <= floor, fmt.Sprintf("%s; the echo floor %s", fmtBytes(res.idleRSS), fmtBytes(res.echoIdleRSS)),
		fmt.Sprintf("<= floor + %s = %s", fmtBytes(targetIdleOverFloor), fmtBytes(floor)))
	check(fmt.Sprintf("goroutines per idle connected page at %d pages", res.idleSessions), res.idleSessions > 0 && !math.IsNaN(res.idleGoroutines),
		res.idleGoroutines <= targetIdleGoroutines+0.01, fmt.Sprintf("%.2f", res.idleGoroutines), fmt.Sprintf("<= %d", targetIdleGoroutines))
	check(fmt.Sprintf("idle session with no page, %d sessions: goroutines", res.parkedSessions), res.parkedSessions > 0 && !math.IsNaN(res.parked.goroutines),
		res.parked.goroutines < 0.01, fmt.Sprintf("%.3f per session", res.parked.goroutines), "0 (unloaded)")
	check(fmt.Sprintf("idle session with no page, %d sessions: resident (RSS)", res.parkedSessions), res.parkedSessions > 0,
		res.parked.rss < targetParkedBytes, fmt.Sprintf("%s per session (heap %s; a second batch %s)", fmtBytes(res.parked.rss), fmtBytes(res.parked.heap), fmtBytes(res.parkedMore.rss)), "< "+fmtBytes(targetParkedBytes))
	oneWay := res.streamFloor.p50
	check("streaming delay p50, engine to page", res.streamDelay.n > 0 && res.streamFloor.n > 0, res.streamDelay.p50 <= oneWay+targetStreamOverOneWay,
		fmt.Sprintf("%s; the echo's one way %s", fmtDur(res.streamDelay.p50), fmtDur(oneWay)),
		fmt.Sprintf("<= one way + %s = %s", fmtDur(targetStreamOverOneWay), fmtDur(oneWay+targetStreamOverOneWay)))
	if peer == nil {
		r.printf("  %-62s %s", "against the AI SDK", peerNote)
		return
	}
	rps := res.throughput / peer.rpsC16
	check("client calls settled/s / the AI SDK's round trips/s (16 clients)", res.throughput > 0, rps >= targetPeerRPS,
		fmt.Sprintf("%.1fx: %.0f/s / %.1f/s", rps, res.throughput, peer.rpsC16), fmt.Sprintf(">= %dx", targetPeerRPS))
	p50 := ratio(peer.median, res.toolRTT.p50)
	check("the AI SDK's round trip median / client-tool round trip p50", res.toolRTT.n > 0, p50 >= targetPeerP50,
		fmt.Sprintf("1/%.1f: %s / %s", p50, fmtDur(res.toolRTT.p50), fmtDur(peer.median)), fmt.Sprintf("<= 1/%d", targetPeerP50))
}
