package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clienttools/gateway/control"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
)

// The operator's commands on the store, for what no browser asks: finding
// a person's chats and erasing them without their cookie, and a copy of
// every chat (docs/storage.md).
//
//	gateway sessions [--data-dir D | --nats-url U]   every chat, one JSON object a line
//	gateway delete [--data-dir D | --nats-url U] ID...
//	gateway backup [--data-dir D | --nats-url U] --to DIR
//
// On the embedded store, a gateway running on it answers them itself,
// through its control socket (package control); stopped, the command opens
// the store (its lock lets one process in). On a NATS nodes share, a chat
// a node runs is refused, naming the node.
var adminCommands = []string{"sessions", "delete", "backup"}

// adminTimeout bounds a command's work with the store; backupTimeout a
// backup's, which copies every chat.
const (
	adminTimeout  = time.Minute
	backupTimeout = time.Hour
	// deleteWait is a deletion's through the control socket: the
	// gateway's own bound, and a margin.
	deleteWait = control.DeleteTimeout + 10*time.Second
)

// runAdmin runs the command args[0] with the rest of args.
func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := args[0]
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	dataDir := fs.String("data-dir", env("GATEWAY_DATA_DIR", defaultDataDir(getenv)), "the embedded store's directory; a gateway running on it answers through its control socket (env GATEWAY_DATA_DIR)")
	natsURL := fs.String("nats-url", env("GATEWAY_NATS_URL", ""), "the NATS the gateway nodes share, instead of the data directory (env GATEWAY_NATS_URL)")
	var to *string
	if name == "backup" {
		to = fs.String("to", "", "the backup: a new or empty directory, which becomes a data directory a gateway starts on (--data-dir)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		fs.SetOutput(stderr)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: gateway %s [--data-dir DIR | --nats-url URL]%s\n", name, map[string]string{"delete": " SESSION...", "backup": " --to DIR"}[name])
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (gateway %s -h lists the flags)", err, name)
	}
	ids := fs.Args()
	switch {
	case name == "delete" && len(ids) == 0:
		return errors.New("gateway delete: name the sessions to delete (their ids, as gateway sessions lists them)")
	case name != "delete" && len(ids) > 0:
		return fmt.Errorf("gateway %s: unexpected argument %q", name, ids[0])
	case name == "backup" && *to == "":
		return errors.New("gateway backup: --to names the directory to copy every chat into (new or empty)")
	}
	timeout := adminTimeout
	if name == "delete" {
		// Each deletion has its own bound, the gateway's and a margin:
		// one the command gave up on may be done by the gateway after.
		timeout = time.Duration(len(ids)) * deleteWait
	}
	if name == "backup" {
		abs, err := filepath.Abs(*to)
		if err != nil {
			return fmt.Errorf("to %q: %w", *to, err)
		}
		*to, timeout = abs, backupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Attach: the nodes' settings (their flags, not these) stay as they are.
	o := jetstream.Options{URL: *natsURL, Attach: true, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *natsURL != "" {
		o.Node = fmt.Sprintf("admin-%d", os.Getpid()) // named in the leases it takes
	} else {
		dir, err := filepath.Abs(*dataDir)
		if err != nil {
			return fmt.Errorf("data-dir %q: %w", *dataDir, err)
		}
		// A gateway running on it answers the command itself; else the
		// embedded store's node, the gateway stopped (its lock says so):
		// the leases a crash left are this node's to take back.
		switch c, err := control.Dial(ctx, dir); {
		case err == nil:
			defer c.Close()
			return runOnGateway(ctx, c, name, ids, to, stdout)
		case !errors.Is(err, control.ErrNotRunning):
			return err
		}
		o.DataDir = dir
	}
	store, err := jetstream.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("failed to open the store: %w", err)
	}
	defer store.Close()
	if name == "backup" {
		copied, err := store.Backup(ctx, *to)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, describeCopied(copied, *to))
		return nil
	}
	sums, err := store.Summaries(ctx, "")
	if err != nil {
		return fmt.Errorf("failed to list the sessions: %w", err)
	}
	if name == "sessions" {
		return control.WriteSessions(stdout, sums)
	}
	return deleteSessions(ctx, store, sums, ids, stdout)
}

// runOnGateway runs the command on the gateway that runs on the data
// directory, through its control socket: a chat it runs is ended where
// it runs, its pages and its worker told.
func runOnGateway(ctx context.Context, c *control.Client, name string, ids []string, to *string, stdout io.Writer) error {
	switch name {
	case "sessions":
		return c.Sessions(ctx, stdout)
	case "backup":
		said, err := c.Backup(ctx, *to)
		fmt.Fprint(stdout, said)
		return err
	}
	return deleteEach(ids, stdout, func(id string) error {
		ctx, cancel := context.WithTimeout(ctx, deleteWait)
		defer cancel()
		err := c.Delete(ctx, id)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("no answer in %v, and the gateway may still delete it (gateway sessions says): %w", deleteWait, err)
		}
		return err
	})
}

// deleteSessions deletes each session of ids, under its lease.
func deleteSessions(ctx context.Context, store *jetstream.Store, sums []engine.Summary, ids []string, w io.Writer) error {
	return deleteEach(ids, w, func(id string) error { return deleteSession(ctx, store, sums, id) })
}

// deleteEach deletes each session of ids with del, and says so; it fails
// naming those it did not delete.
func deleteEach(ids []string, w io.Writer, del func(id string) error) error {
	var failed []string
	for _, id := range ids {
		err := del(id)
		if err != nil {
			fmt.Fprintf(w, "%s: not deleted: %v\n", id, err)
			failed = append(failed, id)
			continue
		}
		fmt.Fprintf(w, "%s: deleted\n", id)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d sessions not deleted: %v", len(failed), len(ids), failed)
	}
	return nil
}

func deleteSession(ctx context.Context, store *jetstream.Store, sums []engine.Summary, id string) error {
	if err := engine.CheckID(id); err != nil {
		return fmt.Errorf("no session has this id: %w", err)
	}
	if !slices.ContainsFunc(sums, func(s engine.Summary) bool { return s.ID == id }) {
		if _, err := store.JournalUpdated(ctx, id); err != nil {
			return fmt.Errorf("no such session (gateway sessions lists them): %w", err)
		}
	}
	own, err := store.Own(ctx, id, func() {})
	if err != nil {
		return fmt.Errorf("%w: delete it with DELETE /sessions/{id} and the browser's cookie, or once its pages are closed and it has left memory (--unload)", err)
	}
	defer func() { _ = own.Release(context.WithoutCancel(ctx)) }()
	return store.Delete(ctx, id)
}

// describeCopied says what a backup copied, a stream a line, and where it
// is: the directory a gateway starts on.
func describeCopied(copied []jetstream.Copied, dir string) string {
	var b strings.Builder
	for _, c := range copied {
		fmt.Fprintf(&b, "%s: %d messages, %d bytes\n", c.Stream, c.Messages, c.Bytes)
	}
	fmt.Fprintf(&b, "backed up into %s: a gateway started with --data-dir on it (or on a copy of it) has every chat as copied\n", dir)
	return b.String()
}
