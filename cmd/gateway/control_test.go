package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/clienttools/gateway/control"
	"github.com/clienttools/gateway/store/jetstream"
)

// TestShutdownStopsABackup: a gateway that stops while a backup runs
// through its control socket stops the backup (which then removes what
// it wrote) rather than wait for it, still serving, past its drain.
func TestShutdownStopsABackup(t *testing.T) {
	dir := t.TempDir()
	started, ended := make(chan struct{}), make(chan error, 1)
	store := openedStore{dataDir: dir, backup: func(ctx context.Context, to string) ([]jetstream.Copied, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}}
	stop := serveControl(store, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := control.Dial(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	answered := make(chan error, 1)
	go func() { _, err := c.Backup(context.Background(), "/backups/b1"); answered <- err }()
	<-started
	t0 := time.Now()
	stop()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the backup ended with %v, want its context cancelled", err)
		}
	default:
		t.Errorf("stop returned after %v with the backup still running", time.Since(t0))
	}
	if err := <-answered; err == nil {
		t.Error("the command was told its backup was taken")
	}
}
