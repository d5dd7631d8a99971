package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		}
		os.Exit(1)
	}
}

// allPhases in the order they run.
var allPhases = []string{"latency", "throughput", "stream", "idle", "parked"}

// config is what the flags say.
type config struct {
	// Server mode.
	serve    string // "gateway" or "echo": serve instead of measuring
	listen   string
	lifeline bool
	logLevel slog.Level
	store    string        // memory or jetstream: where the bench gateway keeps sessions
	unload   time.Duration // the gateway's engine.Options.Unload; 0: its default

	// Measuring.
	stores         []string // the stores measured, one after the other
	url            string
	pid            int
	phases         []string
	turns          int
	sessionTurns   int
	callsPerTurn   int
	sessions       int
	duration       time.Duration
	warmup         time.Duration
	streamSessions int
	streamDeltas   int
	streamInterval time.Duration
	idle           int
	parked         int
	peerAISDK      string
	parallel       int
	timeout        time.Duration
	deflate        bool

	// Profiles of the gateway process.
	cpuProfile string
	memProfile string
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gatewaybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gatewaybench [flags]          measure (see `go doc ./cmd/gatewaybench`)")
		fmt.Fprintln(stderr, "       gatewaybench -serve gateway|echo [-listen ADDR]   serve only")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.serve, "serve", "", `serve instead of measuring: "gateway" (the bench agent) or "echo" (the floor)`)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:0", "address to serve on, with -serve")
	fs.BoolVar(&c.lifeline, "stdin-lifeline", false, "with -serve: exit when stdin closes (how the measuring parent stops its children)")
	stores := fs.String("store", "memory", "the gateway's session store: memory, or jetstream (embedded, in a new temporary directory, as the gateway's default); when measuring, a comma-separated list runs every phase on each in turn, with the targets of each")
	fs.DurationVar(&c.unload, "unload", 0, "with -serve gateway: how long a session with no page stays in memory (engine.Options.Unload); 0: the engine's default")
	logLevel := fs.String("log-level", "warn", "the gateway's log level: debug, info (a few lines per tool call, to this process's stderr), warn or error")

	fs.StringVar(&c.url, "url", "", "measure a running gateway at this URL (http://host:port) instead of starting one")
	fs.IntVar(&c.pid, "pid", 0, "with -url: read the gateway's VmRSS from /proc/PID/status when it has no /bench/stats")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run, comma-separated: "+strings.Join(allPhases, ", "))
	fs.IntVar(&c.turns, "turns", 5000, "latency: sequential round trips (echo) and turns (gateway) on one connection")
	fs.IntVar(&c.sessionTurns, "session-turns", 20, "latency, throughput: turns a session takes before its browser opens a new one (0: never); the engine copies the whole transcript into each model request, so a turn costs more the longer its session")
	fs.IntVar(&c.callsPerTurn, "calls-per-turn", 1, "latency, throughput: client calls the model makes in parallel on each user turn (at most 100)")
	fs.IntVar(&c.sessions, "sessions", 1000, "throughput: concurrent sessions, each in closed loop (next message on session.idle)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "throughput: measured window")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "throughput: load before the window opens, not measured")
	fs.IntVar(&c.streamSessions, "stream-sessions", 1, "stream: concurrent sessions streaming")
	fs.IntVar(&c.streamDeltas, "stream-deltas", 2000, "stream: deltas per session")
	fs.DurationVar(&c.streamInterval, "stream-interval", time.Millisecond, "stream: pause between two deltas, as a model's tokens arrive")
	fs.IntVar(&c.idle, "idle", 10000, "idle: sessions connected and left idle for the memory reading")
	fs.IntVar(&c.parked, "parked", 5000, "parked: sessions opened, left by their page and unloaded for the memory reading")
	fs.StringVar(&c.peerAISDK, "peer-aisdk", "../shared/peers/aisdk", "the Vercel AI SDK harness (copied to a temporary folder and run once, before the phases) to set beside the gateway; absent or empty: skipped, with a note")
	fs.IntVar(&c.parallel, "dial-parallel", 64, "connections opened at the same time while setting up a phase")
	fs.BoolVar(&c.deflate, "deflate", false, "the gateway's pages offer permessage-deflate and compress every frame they send, as Chromium does; the gateway (--compress-over 1024) then compresses its frames of 1 KiB or more (none of a bench turn's), and its idle pages hold the WebSocket library's inflate buffer")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the gateway's CPU profile during the throughput window to this file")
	fs.StringVar(&c.memProfile, "memprofile", "", "write the gateway's heap profile with -idle sessions connected to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, st := range strings.Split(*stores, ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		if st != "memory" && st != "jetstream" {
			return c, fmt.Errorf("store %q: want memory or jetstream", st)
		}
		c.stores = append(c.stores, st)
	}
	if len(c.stores) == 0 {
		return c, errors.New("store: want memory, jetstream or both")
	}
	c.store = c.stores[0]
	if c.serve != "" && len(c.stores) > 1 {
		return c, errors.New("with -serve, -store takes one store")
	}
	if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return c, fmt.Errorf("log-level %q: want debug, info, warn or error", *logLevel)
	}
	switch c.serve {
	case "", serveGateway, serveEcho:
	default:
		return c, fmt.Errorf("serve %q: want %q or %q", c.serve, serveGateway, serveEcho)
	}
	for _, p := range strings.Split(*phases, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return c, fmt.Errorf("phase %q: want some of %s", p, strings.Join(allPhases, ", "))
		}
		c.phases = append(c.phases, p)
	}
	for name, v := range map[string]int{"turns": c.turns, "sessions": c.sessions, "stream-sessions": c.streamSessions,
		"stream-deltas": c.streamDeltas, "idle": c.idle, "parked": c.parked, "dial-parallel": c.parallel, "calls-per-turn": c.callsPerTurn} {
		if v <= 0 {
			return c, fmt.Errorf("%s is %d, want at least 1", name, v)
		}
	}
	if c.callsPerTurn > maxCallsPerTurn {
		return c, fmt.Errorf("calls-per-turn is %d, want at most %d", c.callsPerTurn, maxCallsPerTurn)
	}
	if c.sessionTurns < 0 {
		return c, fmt.Errorf("session-turns is %d, want 0 or more", c.sessionTurns)
	}
	if c.duration <= 0 || c.timeout <= 0 || c.warmup < 0 || c.streamInterval < 0 || c.unload < 0 {
		return c, errors.New("duration and timeout must be positive, warmup, stream-interval and unload not negative")
	}
	if c.url != "" {
		c.url = strings.TrimRight(c.url, "/")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	if cfg.serve != "" {
		return serve(ctx, cfg, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	return measure(ctx, cfg, stdout, stderr)
}
