package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/clienttools/gateway/control"
	"github.com/clienttools/gateway/engine"
)

// controlStopGrace bounds the wait, at shutdown, for the operator's
// commands under way: a deletion's purge, a stopped backup's removal of
// what it wrote (the backup's server takes about 5 s to give up a
// restore).
const controlStopGrace = 10 * time.Second

// serveControl serves the operator's commands (gateway sessions, gateway
// delete, gateway backup) on the embedded store's
// control socket in dir, so that they work while the gateway runs
// (package control); stop closes it, once however often called, before the engine: a deletion asked
// then would find it shutting down. With no dir (another store) or no
// socket (a path too long for one), stop does nothing, and the commands
// need the gateway stopped, as the log says.
func serveControl(store openedStore, eng *engine.Engine, logger *slog.Logger) (stop func()) {
	dir := store.dataDir
	if dir == "" {
		return func() {}
	}
	ln, err := control.Listen(dir)
	if err != nil {
		logger.Warn("the commands on the store (gateway sessions, gateway delete, gateway backup) need the gateway stopped: its control socket is off", "err", err)
		return func() {}
	}
	base, cancelBase := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler: control.Handler(control.Options{
			Summaries:      func(ctx context.Context) ([]engine.Summary, error) { return eng.Store().Summaries(ctx, "") },
			Delete:         eng.Delete,
			DeleteUnlisted: eng.DeleteUnlisted,
			Backup: func(ctx context.Context, dir string) (string, error) {
				copied, err := store.backup(ctx, dir)
				return describeCopied(copied, dir), err
			},
			Logger: logger,
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		// A backup ends with its command, or with the gateway: stop
		// cancels this, and the backup removes what it wrote.
		BaseContext: func(net.Listener) context.Context { return base },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("the control socket failed: the commands on the store need the gateway stopped", "err", err)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			// A backup under way is stopped (it removes what it wrote); a
			// deletion finishes, its context its own; a listing too. What
			// is left after controlStopGrace ends with the store's close.
			cancelBase()
			ctx, cancel := context.WithTimeout(context.Background(), controlStopGrace)
			defer cancel()
			_ = srv.Shutdown(ctx) // removes the socket's file as it closes the listener
			<-done
		})
	}
}
