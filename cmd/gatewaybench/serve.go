package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/coder/websocket"
)

// Server kinds of -serve.
const (
	serveGateway = "gateway"
	serveEcho    = "echo"
)

// The bench agent's words.
const (
	echoTool     = "echo"
	replyText    = "done"
	streamPrefix = "stream " // "stream N INTERVAL": N stamped deltas, INTERVAL apart
	// maxCallsPerTurn bounds "calls K ...".
	maxCallsPerTurn = 100
	// fileHeadroom is the descriptors a process needs besides its sockets.
	fileHeadroom = 1024
	// maxFiles is what each process asks RLIMIT_NOFILE for: enough for the
	// largest -idle this tool is meant for plus headroom.
	maxFiles = 32768
)

// serve runs one server until ctx ends (or stdin closes, with
// -stdin-lifeline), after printing "serving KIND at URL pid PID".
func serve(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if _, err := raiseFileLimit(maxFiles); err != nil {
		fmt.Fprintln(stderr, "gatewaybench:", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.lifeline {
		go func() {
			// Ends when the parent closes stdin or dies; then the process exits.
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	prof := &profiler{cpuPath: cfg.cpuProfile, memPath: cfg.memProfile}
	defer prof.stop()

	mux := http.NewServeMux()
	prof.routes(mux)
	var shutdown []func(context.Context) error
	switch cfg.serve {
	case serveGateway:
		h, eng, closers, err := newGateway(ctx, logger, cfg.store, cfg.unload)
		if err != nil {
			return err
		}
		prof.sessions = eng.Loaded
		mux.Handle("/", h)
		shutdown = closers
	case serveEcho:
		mux.HandleFunc("GET /ws", echoHandler)
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving %s at http://%s pid %d\n", cfg.serve, ln.Addr(), os.Getpid())

	select {
	case err := <-serveErr:
		return fmt.Errorf("server failed: %w", err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	errs := []error{srv.Shutdown(sctx)}
	for _, f := range shutdown {
		errs = append(errs, f(sctx))
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// newGateway builds the bench gateway from the packages, as cmd/gateway
// does, with the bench agent instead of the demo. It returns the handler
// and what to call on shutdown, in order.
func newGateway(ctx context.Context, logger *slog.Logger, storeKind string, unload time.Duration) (http.Handler, *engine.Engine, []func(context.Context) error, error) {
	var store engine.Store = engine.NewMemoryStore()
	var closers []func(context.Context) error
	if storeKind == "jetstream" {
		dir, err := os.MkdirTemp("", "gatewaybench-")
		if err != nil {
			return nil, nil, nil, err
		}
		js, err := jetstream.Open(ctx, jetstream.Options{DataDir: dir, Logger: logger})
		if err != nil {
			return nil, nil, nil, err
		}
		store = js
		closers = append(closers, func(context.Context) error { err := js.Close(); _ = os.RemoveAll(dir); return err })
	}
	worker := &engine.ToolWorker{Agent: engine.AgentConfig{
		Model:  "bench",
		Stream: true,
		Tools: []engine.AgentTool{{
			Name:        echoTool,
			Description: "Echo the text back, from the browser.",
			Input:       engine.Schema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Handler:     engine.HandlerClient,
		}},
	}}
	bm := &benchModel{}
	eng, err := engine.New(engine.Options{
		Worker: worker,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return bm, nil }),
		Store:  store,
		Logger: logger,
		Unload: unload,
		// Every simulated browser has a cookie of its own, except in the
		// parked phase, which opens many sessions per cookie.
		MaxLiveSessions: -1,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	// Compression on (--compress-over 1024): only -deflate's pages
	// negotiate it.
	gw, err := gateway.New(gateway.Options{Engine: eng, Logger: logger, NewSessionsPerMinute: -1, CompressOver: 1024})
	if err != nil {
		return nil, nil, nil, err
	}
	return gw.Handler(), eng, append([]func(context.Context) error{gw.Shutdown, eng.Close}, closers...), nil
}

// benchModel is the test model. A user turn "stream N INTERVAL" streams N
// deltas, INTERVAL apart, each the CLOCK_MONOTONIC reading in ns taken just
// before the engine gets it. A user turn "calls K TEXT" calls echo K times in
// parallel with TEXT; any other calls it once with the whole text. The turn
// after the tool results replies replyText.
type benchModel struct {
	ids atomic.Int64 // tool use ids, unique as a provider's are
}

func (m *benchModel) Generate(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	if len(req.Messages) == 0 {
		return model.Response{}, errors.New("bench model: empty transcript")
	}
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == model.RoleTool:
		onDelta(replyText)
		return model.Response{Text: replyText, StopReason: model.StopEndTurn}, nil
	case strings.HasPrefix(last.Content, streamPrefix):
		return streamStamps(ctx, last.Content, onDelta)
	default:
		// "calls K rest": K parallel calls in one turn; anything else: one.
		calls, text := 1, last.Content
		if f := strings.SplitN(text, " ", 3); len(f) == 3 && f[0] == "calls" {
			if k, err := strconv.Atoi(f[1]); err == nil && k > 0 && k <= maxCallsPerTurn {
				calls, text = k, f[2]
			}
		}
		args, err := json.Marshal(map[string]string{"text": text})
		if err != nil {
			return model.Response{}, err
		}
		uses := make([]model.ToolUse, calls)
		for i := range uses {
			uses[i] = model.ToolUse{ID: "toolu_" + strconv.FormatInt(m.ids.Add(1), 10), Name: echoTool, Arguments: string(args)}
		}
		return model.Response{ToolUses: uses, StopReason: model.StopToolUse}, nil
	}
}

func streamStamps(ctx context.Context, content string, onDelta func(string)) (model.Response, error) {
	n, interval, err := parseStream(content)
	if err != nil {
		return model.Response{}, fmt.Errorf("bench model: %w", err)
	}
	var text strings.Builder
	err = stamps(ctx, n, interval, func(stamp string) error {
		onDelta(stamp)
		text.WriteString(stamp)
		text.WriteByte(' ')
		return nil
	})
	if err != nil {
		return model.Response{Text: text.String(), StopReason: model.StopCancelled}, err
	}
	return model.Response{Text: text.String(), StopReason: model.StopEndTurn}, nil
}

// parseStream reads "stream N INTERVAL".
func parseStream(content string) (n int, interval time.Duration, err error) {
	fields := strings.Fields(strings.TrimPrefix(content, streamPrefix))
	if len(fields) == 2 {
		n, _ = strconv.Atoi(fields[0])
		interval, _ = time.ParseDuration(fields[1])
	}
	if n <= 0 || interval < 0 {
		return 0, 0, fmt.Errorf("want %q, got %q", streamPrefix+"N INTERVAL", content)
	}
	return n, interval, nil
}

// stamps calls emit with n stamps of CLOCK_MONOTONIC, interval apart, each
// read just before its emit: the gateway's bench model and the echo
// server's stream pace their frames alike.
func stamps(ctx context.Context, n int, interval time.Duration, emit func(string) error) error {
	t := time.NewTimer(interval)
	t.Stop() // since Go 1.23, a stopped timer holds no stale tick
	defer t.Stop()
	for i := 0; i < n; i++ {
		if i > 0 && interval > 0 {
			t.Reset(interval)
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := emit(strconv.FormatInt(monoNow(), 10)); err != nil {
			return err
		}
	}
	return nil
}

// echoHandler is the floor: a bare coder/websocket server that writes back
// every message it reads, unchanged, except "stream N INTERVAL": it then
// writes N frames shaped as the gateway's model.delta, each carrying the
// stamp read just before its write, INTERVAL apart (the stream phase's
// floor).
func echoHandler(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := context.Background()
	var frame []byte
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, []byte(streamPrefix)) {
			if err := ws.Write(ctx, typ, data); err != nil {
				return
			}
			continue
		}
		n, interval, err := parseStream(string(data))
		if err != nil {
			_ = ws.Close(websocket.StatusPolicyViolation, err.Error())
			return
		}
		seq := 0
		err = stamps(ctx, n, interval, func(stamp string) error {
			seq++
			frame = append(frame[:0], `{"type":"model.delta","seq":`...)
			frame = strconv.AppendInt(frame, int64(seq), 10)
			frame = append(append(append(frame, `,"text":"`...), stamp...), `"}`...)
			return ws.Write(ctx, websocket.MessageText, frame)
		})
		if err != nil {
			return
		}
	}
}

// procStats is a process's memory and CPU, served at /bench/stats.
type procStats struct {
	PID        int     `json:"pid"`
	RSS        int64   `json:"rss"` // VmRSS, bytes
	HWM        int64   `json:"hwm"` // VmHWM, bytes
	HeapInuse  int64   `json:"heapInuse"`
	HeapAlloc  int64   `json:"heapAlloc"` // live objects: HeapInuse less its free slots
	StackInuse int64   `json:"stackInuse"`
	Goroutines int     `json:"goroutines"`
	CPU        float64 `json:"cpu"` // user + system seconds since start
	// Sessions is the engine's count of sessions in memory; -1: not a
	// gateway of this tool.
	Sessions int `json:"sessions"`
	// Runtime is false when only /proc was read (a -url gateway without
	// /bench/stats): the Go runtime fields and CPU are unknown.
	Runtime bool `json:"runtime"`
}

// readStats reads this process's stats. With settle, it first collects
// garbage and returns freed pages to the OS, so RSS counts live memory.
func readStats(settle bool) (procStats, error) {
	if settle {
		// Two collections: what a sync.Pool held survives the first, in
		// its victim cache; then the scavenger returns the free pages.
		runtime.GC()
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := procStats{
		PID:        os.Getpid(),
		HeapInuse:  int64(ms.HeapInuse),
		HeapAlloc:  int64(ms.HeapAlloc),
		StackInuse: int64(ms.StackInuse),
		Goroutines: runtime.NumGoroutine(),
		Sessions:   -1,
		Runtime:    true,
	}
	var err error
	if st.RSS, st.HWM, err = readProcStatus("self"); err != nil {
		return st, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return st, fmt.Errorf("failed to read rusage: %w", err)
	}
	st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	return st, nil
}

// profiler serves the control endpoints under /bench/: stats, and the CPU
// and heap profiles to the files given at start (none: 404).
type profiler struct {
	cpuPath, memPath string
	sessions         func() int // sessions in memory; nil: not a gateway
	mu               sync.Mutex
	cpu              *os.File
}

func (p *profiler) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /bench/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := readStats(r.URL.Query().Get("settle") == "1")
		if p.sessions != nil {
			st.Sessions = p.sessions()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /bench/cpuprofile/start", p.handle(p.startCPU))
	mux.HandleFunc("POST /bench/cpuprofile/stop", p.handle(func() error { p.stop(); return nil }))
	mux.HandleFunc("POST /bench/heapprofile", p.handle(p.writeHeap))
}

func (p *profiler) handle(f func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	}
}

func (p *profiler) startCPU() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpuPath == "" {
		return errors.New("no -cpuprofile file")
	}
	if p.cpu != nil {
		return errors.New("the CPU profile is already running")
	}
	f, err := os.Create(p.cpuPath)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.cpu = f
	return nil
}

// stop ends a running CPU profile; it is safe to call when none runs.
func (p *profiler) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Close()
		p.cpu = nil
	}
}

func (p *profiler) writeHeap() error {
	if p.memPath == "" {
		return errors.New("no -memprofile file")
	}
	f, err := os.Create(p.memPath)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
