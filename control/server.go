package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clienttools/gateway/engine"
)

// SocketName is the control socket's file in the data directory.
const SocketName = "control.sock"

// maxSocketPath is the longest socket path every Unix takes (Linux takes
// 107 bytes, the BSDs and macOS 103; the margin is the terminating NUL's).
const maxSocketPath = 103

// DeleteTimeout bounds a deletion over the socket, as the browsers'
// DELETE /sessions/{id}: the session's end and the store's purge.
const DeleteTimeout = time.Minute

// Listen listens on the control socket in dir, which the caller holds
// the lock of: a socket file there is one an earlier run left (a kill -9
// leaves it), and is replaced. Only a process of the gateway's user, or
// root, may use it: the file's mode is 0600, and on Linux each
// connection's user is checked (SO_PEERCRED). A dir whose socket path is longer than a Unix socket's address
// takes (about 100 bytes) is an error: the caller goes on without it.
func Listen(dir string) (net.Listener, error) {
	path := filepath.Join(dir, SocketName)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket %s: the path is %d bytes, over the %d a Unix socket's address takes: a shorter --data-dir has one", path, len(path), maxSocketPath)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("control socket %s: a file that is no socket is in its place", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket %s: failed to remove an earlier run's: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	// The mode is set after the file is made, and the directory may be
	// open to others: each connection's user is checked too.
	return peerChecked{ln}, nil
}

// peerChecked closes each connection whose peer checkPeer refuses.
type peerChecked struct{ net.Listener }

func (l peerChecked) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if checkPeer(c) == nil {
			return c, nil
		}
		c.Close()
	}
}

// Options are what a Handler answers with.
type Options struct {
	// Summaries lists every stored session's summary (engine.Store's
	// Summaries with no owner). Required.
	Summaries func(ctx context.Context) ([]engine.Summary, error)
	// Delete deletes session id of owner wherever it is (engine.Engine's
	// Delete): its pages are told, then its worker. Required.
	Delete func(ctx context.Context, id, owner string) error
	// DeleteUnlisted deletes session id that no summary lists (its
	// summary lost, its journal kept: engine.Engine's DeleteUnlisted); nil:
	// such an id is not found.
	DeleteUnlisted func(ctx context.Context, id string) error
	// Backup copies the store into dir, a new data directory, and says
	// what it copied. Nil: the gateway takes no backups (POST /backup is
	// 404).
	Backup func(ctx context.Context, dir string) (string, error)
	// Logger records each deletion and backup. Default: slog.Default().
	Logger *slog.Logger
}

// Handler serves the commands: GET /sessions (every session, one JSON
// Session a line, newest first), DELETE /sessions/{id} (204 once it is
// gone; 404 when no session of that id is listed; 503 when the store or
// the gateway's shutdown stopped it: nothing is half gone, and the same
// request deletes it) and POST /backup?to=DIR (200 once the copy is
// whole, saying what it holds; 500 saying why not, with nothing left in
// DIR).
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sessions", func(w http.ResponseWriter, r *http.Request) {
		sums, err := o.Summaries(r.Context())
		if err != nil {
			text(w, http.StatusServiceUnavailable, fmt.Sprintf("failed to list the sessions: %v", err))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = WriteSessions(w, sums)
	})
	mux.HandleFunc("DELETE /sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		// Asked, the deletion goes on if the command is stopped: a purge
		// cut halfway would leave the chat's summary without its journal.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), DeleteTimeout)
		defer cancel()
		err := deleteListed(ctx, o, id)
		if err == nil {
			o.Logger.Info("session deleted by the operator's command", "session", id)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		status := deleteStatus(err)
		level := slog.LevelInfo
		if status >= http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		o.Logger.Log(r.Context(), level, "the operator's deletion failed", "session", id, "status", status, "err", err)
		text(w, status, err.Error())
	})
	if o.Backup != nil {
		mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
			dir := r.URL.Query().Get("to")
			if !filepath.IsAbs(dir) {
				text(w, http.StatusBadRequest, fmt.Sprintf("the backup's directory %q is not an absolute path", dir))
				return
			}
			// The command's end stops the backup, which removes what it
			// wrote: no half backup is left to be taken for a whole one.
			start := time.Now()
			copied, err := o.Backup(r.Context(), dir)
			if err != nil {
				o.Logger.Warn("the operator's backup failed", "dir", dir, "err", err)
				text(w, http.StatusInternalServerError, err.Error())
				return
			}
			o.Logger.Info("backed up the sessions", "dir", dir, "took", time.Since(start).Round(time.Millisecond))
			text(w, http.StatusOK, copied)
		})
	}
	return mux
}

// deleteListed deletes session id as its owner would: the summary names
// the owner; or, listed nowhere, as one no list names.
func deleteListed(ctx context.Context, o Options, id string) error {
	if err := engine.CheckID(id); err != nil {
		return fmt.Errorf("%w: %w", engine.ErrNoSession, err)
	}
	sums, err := o.Summaries(ctx)
	if err != nil {
		return fmt.Errorf("%w: the list of sessions: %w", engine.ErrStoreUnavailable, err)
	}
	i := slices.IndexFunc(sums, func(s engine.Summary) bool { return s.ID == id })
	if i < 0 && o.DeleteUnlisted != nil {
		return o.DeleteUnlisted(ctx, id) // an erasure reaches a chat whose summary was lost
	}
	if i < 0 {
		return fmt.Errorf("%w: no session of this id is listed (gateway sessions lists them)", engine.ErrNoSession)
	}
	return o.Delete(ctx, id, sums[i].Owner)
}

// deleteStatus is a failed deletion's status.
func deleteStatus(err error) int {
	switch {
	case errors.Is(err, engine.ErrNoSession):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrStoreUnavailable), errors.Is(err, engine.ErrOwnedElsewhere),
		errors.Is(err, engine.ErrSessionClosed), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func text(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// Session is one line of gateway sessions: the owner is the browser's
// identity (or the person gateway.Options.Identify names), the title its
// first message.
type Session struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Ended   bool      `json:"ended,omitempty"`
}

// WriteSessions writes sums newest first, one JSON Session a line.
func WriteSessions(w io.Writer, sums []engine.Summary) error {
	sums = slices.Clone(sums)
	slices.SortFunc(sums, func(a, b engine.Summary) int { return b.Updated.Compare(a.Updated) })
	enc := json.NewEncoder(w)
	for _, s := range sums {
		if err := enc.Encode(Session{s.ID, s.Owner, s.Title, s.Created, s.Updated, s.Ended}); err != nil {
			return err
		}
	}
	return nil
}
