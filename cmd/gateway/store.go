package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/nats-io/nats.go"
)

// defaultDataDir is where the embedded store keeps its files when no flag
// says: the user's state directory ($XDG_STATE_HOME, else ~/.local/state),
// else ./gateway-data.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "clienttools-gateway")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "clienttools-gateway")
	}
	return "gateway-data"
}

// openedStore is the sessions' store, and what to tell the user of it.
type openedStore struct {
	engine.Store
	cookies scs.Store      // nil: the gateway's in-memory default
	relay   *gateway.Relay // nil: a single node
	adopt   time.Duration  // engine.Options.Adopt: on a NATS nodes share
	dataDir string         // the embedded store's directory, absolute; "" for another store
	backup  func(ctx context.Context, dir string) ([]jetstream.Copied, error)
	where   string
	close   func()
}

// openStore opens the sessions' store the config names.
func openStore(ctx context.Context, cfg config, logger *slog.Logger) (openedStore, error) {
	if cfg.store == "memory" {
		return openedStore{Store: engine.NewMemoryStore(), where: "memory (sessions are lost when the gateway stops)", close: func() {}}, nil
	}
	o := jetstream.Options{URL: cfg.natsURL, Replicas: cfg.natsReplicas, CookieLifetime: cfg.retain, Logger: logger,
		Node: cfg.nodeID, LeaseTTL: cfg.leaseTTL}
	if cfg.natsURL == "" {
		o.Sync = cfg.fsync
	}
	where := "NATS at " + jetstream.RedactedURLs(cfg.natsURL)
	if cfg.natsURL == "" {
		dir, err := filepath.Abs(cfg.dataDir)
		if err != nil {
			return openedStore{}, fmt.Errorf("data-dir %q: %w", cfg.dataDir, err)
		}
		o.DataDir, where = dir, dir
	}
	// The store's set-up has a minute of its own (jetstream.Open), which
	// starts after the embedded server has read its files.
	s, err := jetstream.Open(ctx, o)
	if errors.Is(err, nats.ErrNoServers) {
		// Which flag, and which servers, without their secrets.
		return openedStore{}, fmt.Errorf("nats-url %s: %w", jetstream.RedactedURLs(cfg.natsURL), err)
	}
	if err != nil {
		return openedStore{}, err
	}
	opened := openedStore{Store: s, cookies: s.Cookies(), dataDir: o.DataDir, backup: s.Backup, where: where, close: func() { closeWithin(storeCloseGrace, s.Close, logger) }}
	if cfg.natsURL != "" {
		opened.relay = gateway.NewRelay(s.Conn(), s.Node())
		// Before any session is resumed: a second node of this name would
		// take the first's sessions for its own.
		checkCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := opened.relay.CheckName(checkCtx)
		cancel()
		if err != nil {
			opened.close()
			return openedStore{}, err
		}
		opened.where += ", node " + s.Node()
		// A dead node's sessions with work in flight are taken over about
		// a lease's time to live after it expired, as its pages are.
		opened.adopt = max(s.LeaseTTL(), time.Second)
	}
	return opened, nil
}

// storeCloseGrace bounds the store's close at shutdown: an embedded server
// that hangs (its files damaged or shared with another process) must not
// keep the process from exiting once everything else has stopped.
const storeCloseGrace = 10 * time.Second

// closeWithin closes with close, and gives up waiting after grace: the
// journal is written ahead, so what was acknowledged is stored already.
func closeWithin(grace time.Duration, close func() error, logger *slog.Logger) {
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		if err != nil {
			logger.Warn("failed to close the session store", "err", err)
		}
	case <-time.After(grace):
		logger.Error("the session store did not close in time: exiting without it (what it acknowledged is stored)", "waited", grace)
	}
}
