package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
)

// The operator's commands on the store, for what no browser asks: finding
// a person's chats and erasing them without their cookie (docs/storage.md).
//
//	gateway sessions [--data-dir D | --nats-url U]   every chat, one JSON object a line
//	gateway delete [--data-dir D | --nats-url U] ID...
//
// On the embedded store the gateway must be stopped: the data directory's
// lock lets one process in. On a NATS nodes share, a chat a node runs is
// refused, naming the node.
var adminCommands = []string{"sessions", "delete"}

// adminTimeout bounds a command's work with the store.
const adminTimeout = time.Minute

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
	dataDir := fs.String("data-dir", env("GATEWAY_DATA_DIR", defaultDataDir(getenv)), "the embedded store's directory, the gateway stopped (env GATEWAY_DATA_DIR)")
	natsURL := fs.String("nats-url", env("GATEWAY_NATS_URL", ""), "the NATS the gateway nodes share, instead of the data directory (env GATEWAY_NATS_URL)")
	if err := fs.Parse(args[1:]); err != nil {
		fs.SetOutput(stderr)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: gateway %s [--data-dir DIR | --nats-url URL]%s\n", name, map[string]string{"delete": " SESSION..."}[name])
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (gateway %s -h lists the flags)", err, name)
	}
	ids := fs.Args()
	switch {
	case name == "delete" && len(ids) == 0:
		return errors.New("gateway delete: name the sessions to delete (their ids, as gateway sessions lists them)")
	case name == "sessions" && len(ids) > 0:
		return fmt.Errorf("gateway sessions: unexpected argument %q", ids[0])
	}
	// Attach: the nodes' settings (their flags, not these) stay as they are.
	o := jetstream.Options{URL: *natsURL, Attach: true, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *natsURL != "" {
		o.Node = fmt.Sprintf("admin-%d", os.Getpid()) // named in the leases it takes
	} else {
		// The embedded store's node, the gateway stopped (its lock says so):
		// the leases a crash left are this node's to take back.
		dir, err := filepath.Abs(*dataDir)
		if err != nil {
			return fmt.Errorf("data-dir %q: %w", *dataDir, err)
		}
		o.DataDir = dir
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	store, err := jetstream.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("failed to open the store: %w", err)
	}
	defer store.Close()
	sums, err := store.Summaries(ctx, "")
	if err != nil {
		return fmt.Errorf("failed to list the sessions: %w", err)
	}
	if name == "sessions" {
		return listSessions(stdout, sums)
	}
	return deleteSessions(ctx, store, sums, ids, stdout)
}

// listSessions writes every session's summary, newest first, one JSON
// object a line: the owner is the browser's identity (or the person
// gateway.Options.Identify names), the title its first message.
func listSessions(w io.Writer, sums []engine.Summary) error {
	slices.SortFunc(sums, func(a, b engine.Summary) int { return b.Updated.Compare(a.Updated) })
	enc := json.NewEncoder(w)
	for _, s := range sums {
		if err := enc.Encode(struct {
			ID      string    `json:"id"`
			Owner   string    `json:"owner"`
			Title   string    `json:"title"`
			Created time.Time `json:"created"`
			Updated time.Time `json:"updated"`
			Ended   bool      `json:"ended,omitempty"`
		}{s.ID, s.Owner, s.Title, s.Created, s.Updated, s.Ended}); err != nil {
			return err
		}
	}
	return nil
}

// deleteSessions deletes each session of ids, under its lease, and says
// so; it fails naming those it did not delete.
func deleteSessions(ctx context.Context, store *jetstream.Store, sums []engine.Summary, ids []string, w io.Writer) error {
	var failed []string
	for _, id := range ids {
		err := deleteSession(ctx, store, sums, id)
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
