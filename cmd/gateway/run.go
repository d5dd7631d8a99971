package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/anthropic"
	"github.com/clienttools/gateway/engine/model/openai"
	"github.com/clienttools/gateway/engine/model/providers"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/httpworker"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/static"
	"github.com/clienttools/gateway/web"
)

// run starts the gateway and serves until ctx ends, then shuts down
// gracefully. It prints the URL to open on stdout once it listens.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && slices.Contains(adminCommands, args[0]) {
		return runAdmin(ctx, args, getenv, stdout, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	m := metrics.New()
	models, err := buildModels(cfg, getenv, logger)
	if err != nil {
		return err
	}
	// Settings the docs say are never for production, said at start.
	var worker engine.Worker = demo.Worker(cfg.model)
	if cfg.workerURL != "" {
		hw, err := httpworker.New(httpworker.Options{URL: cfg.workerURL, Secret: []byte(cfg.workerSecret), MaxInFlight: cfg.workerMaxInFlight, MaxResponseBytes: cfg.workerMaxResponse, Logger: logger, Metrics: m})
		if err != nil {
			return err
		}
		if n := len(cfg.workerSecret); n < minWorkerSecret {
			// A development secret ("dev-secret") is taken; say so once.
			logger.Warn("the worker secret is short: use at least 32 random bytes (openssl rand -hex 32)", "bytes", n)
		}
		defer hw.Close()
		worker = hw
		if cfg.pageTools {
			worker = demo.WithPageTools(hw)
			logger.Info("the demo page's browser tools are added to the worker's agent where it lacks them: --page-tools none leaves the agent as the worker wrote it")
		}
	}
	stopTracing, err := startTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	if stopTracing != nil {
		defer func() {
			flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := stopTracing(flush); err != nil {
				logger.Warn("failed to flush the last spans", "err", err)
			}
		}()
	}
	// Listen before anything is opened: a start that cannot listen leaves
	// the data as it was (opening the store resumes sessions, which may
	// settle a call).
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	defer ln.Close()
	var mln net.Listener
	if cfg.metricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.metricsListen); err != nil {
			return fmt.Errorf("failed to listen for metrics: %w", err)
		}
		defer mln.Close()
	}
	store, err := openStore(ctx, cfg, logger)
	if err != nil {
		return startErr(ctx, err)
	}
	defer store.close()
	eng, err := engine.New(engine.Options{
		Worker:          worker,
		Models:          models,
		Store:           store.Store,
		Logger:          logger,
		ClientTimeout:   cfg.clientTimeout,
		WorkerTimeout:   cfg.workerTimeout,
		Retain:          cfg.retain,
		Adopt:           store.adopt,
		Unload:          cfg.unload,
		ReplayBytes:     cfg.replayMemory,
		Drain:           cfg.drain,
		MaxLiveSessions: cfg.maxLive,
		MaxDepth:        cfg.maxDepth,
		MaxFanOut:       cfg.maxFanOut,
		Metrics:         m,
		MaxMessageBytes: cfg.maxMessage,
		Limits:          cfg.limits,
	})
	if err != nil {
		return err
	}
	if err := m.WatchStore(eng.Health); err != nil {
		return err
	}
	if err := eng.Resume(ctx); err != nil {
		return startErr(ctx, err)
	}
	page, err := web.Handler(web.PageProps{AssetVersion: static.Version()})
	if err != nil {
		return err
	}
	var metricsHere http.Handler
	if cfg.metricsListen == "" {
		metricsHere = m.Handler()
	}
	gw, err := gateway.New(gateway.Options{
		Engine:               eng,
		MetricsHandler:       metricsHere,
		OriginPatterns:       cfg.origins,
		Hosts:                cfg.hosts,
		MaxSockets:           cfg.maxSockets,
		NewSessionsPerMinute: cfg.maxNew,
		Metrics:              m,
		ReadLimit:            cfg.readLimit,
		CompressOver:         cfg.compressOver,
		PingInterval:         cfg.pingInterval,
		CookieStore:          store.cookies,
		CookieLifetime:       cfg.retain, // a browser's identity lives as long as its chats
		CookieSameSite:       cfg.sameSite,
		CookieSecure:         cfg.cookieSecure,
		Relay:                store.relay,
		Page:                 page,
		Static:               static.FS,
		Logger:               logger,
	})
	if err != nil {
		return err
	}

	if mln != nil {
		msrv := &http.Server{Handler: metricsMux(m), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		logger.Info("metrics served", "addr", mln.Addr().String(), "path", "/metrics")
	}
	stopControl := serveControl(store, eng, logger)
	defer stopControl() // a start that failed from here on
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "gateway listening: open http://%s/\n", browsable(ln.Addr()))
	fmt.Fprintf(stdout, "gateway sessions kept in: %s\n", store.where)
	fmt.Fprintf(stdout, "gateway model: %s\n", describeModel(cfg, models))
	model := cfg.model
	if cfg.workerURL != "" {
		model = "the worker's" // its agent names it, per session
	}
	logger.Info("gateway started", "addr", ln.Addr().String(), "model", model)

	select {
	case err := <-serveErr:
		return fmt.Errorf("server failed: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	// Stop accepting, close the sockets with 1001 and end the streams,
	// and, alongside, the operator's commands (a backup under way is
	// stopped); then end the sessions.
	controlStopped := make(chan struct{})
	go func() { stopControl(); close(controlStopped) }()
	errs := []error{gw.ShutdownServer(shutdownCtx, srv)}
	<-controlStopped
	errs = append(errs, eng.Close(shutdownCtx))
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// errInterrupted: a signal stopped the gateway while it started. The data
// is as the last run left it, or as far as this start got: nothing is
// damaged, and a start resumes from it (main exits 0).
var errInterrupted = errors.New("stopped while starting; the stored sessions are intact: start it again to go on")

// startErr is err, or errInterrupted when it is the cancellation of ctx
// (a signal) meanwhile: no sign of damaged data. Another error (a lock
// held, a damaged journal) stays what it is.
func startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return errInterrupted
	}
	return err
}

// idleTimeout closes a keep-alive connection that carries no request: a
// client that opens many and sends nothing holds none for long. (A
// request's body has its own bound: gateway.Options.ChatBodyTimeout.)
const idleTimeout = 2 * time.Minute

// buildModels resolves the agent's model id: "scripted" (or any id, with
// --offline) to the scripted model, others to the configured providers.
func buildModels(cfg config, getenv func(string) string, logger *slog.Logger) (model.Resolver, error) {
	var sm *scripted.Model
	var err error
	if cfg.script != "" {
		sm, err = scripted.LoadFile(cfg.script)
	} else {
		sm, err = scripted.New(scripted.Demo())
	}
	if err != nil {
		return nil, fmt.Errorf("failed to load the script (--script, GATEWAY_SCRIPT): %w", err)
	}
	if cfg.offline {
		return model.ResolverFunc(func(string) (model.Model, error) { return sm, nil }), nil
	}
	r, err := providers.New(providers.Config{
		Anthropic:    anthropic.Options{BaseURL: cfg.anthropicURL, StreamIdleTimeout: cfg.modelIdle, Logger: logger},
		OpenAI:       openai.Options{BaseURL: cfg.openaiURL, StreamIdleTimeout: cfg.modelIdle, Logger: logger},
		OpenAIModels: cfg.openaiModels,
		Scripted:     sm,
	}, getenv)
	if err != nil {
		return nil, err
	}
	// A model id that nothing serves should stop the start, not every chat.
	if _, err := r.Resolve(cfg.model); err != nil {
		return nil, fmt.Errorf("the demo agent's model (--model, GATEWAY_MODEL): %w", err)
	}
	return r, nil
}

// browsable is addr as a browser can open it: a wildcard host (":8080",
// "[::]:8080") becomes localhost.
func browsable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
}

// metricsMux serves m's registry at /metrics.
func metricsMux(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

// minWorkerSecret is the secret's length below which the start warns.
const minWorkerSecret = 32

// describeModel says which model the demo agent runs.
func describeModel(cfg config, models model.Resolver) string {
	var provider string
	if p, ok := models.(interface{ Provider(string) string }); ok {
		provider = p.Provider(cfg.model) // the route Resolve takes: --openai-models may send claude- ids elsewhere
	}
	switch {
	case cfg.workerURL != "" && cfg.offline:
		return "chosen by the worker (--worker-url); every id is served by the scripted model (--offline)"
	case cfg.workerURL != "":
		return "chosen by the worker (--worker-url)"
	case cfg.offline:
		return "scripted (--offline: every model id is served by the scripted model)"
	case cfg.model == "scripted":
		return "scripted (offline; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real model)"
	case provider != "":
		return cfg.model + " (" + provider + "; --model chooses another)"
	}
	return cfg.model + " (--model chooses another)"
}
