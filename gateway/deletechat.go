package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
)

// deleteTimeout bounds a deletion: the session's end (its worker's
// session.end included), and the store's purge of its journal and summary.
const deleteTimeout = time.Minute

// deleteSession answers DELETE /sessions/{id}: the browser's chat of that
// id is deleted, in memory and in the store (engine.Delete), wherever it
// runs: one another node runs is deleted by that node, asked through the
// relay. 204 once it is gone; 404 for a chat this browser does not have
// (another browser's included).
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	browser, ok := s.admitBrowser(w, r, "chat deletion refused", "DELETE")
	if !ok {
		return
	}
	id := r.PathValue("id")
	// Asked, the deletion goes on if the browser leaves: a purge cut
	// halfway would leave the chat's summary without its journal.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), deleteTimeout)
	defer cancel()
	err := s.opts.Engine.Delete(ctx, id, browser)
	var elsewhere *engine.OwnedElsewhereError
	if errors.As(err, &elsewhere) && s.opts.Relay != nil {
		err = s.opts.Relay.askDelete(ctx, elsewhere.Node, id, browser)
	}
	if err == nil {
		s.logger.Info("chat deleted", "session", id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	status, err := deleteStatus(id, err)
	if status >= http.StatusInternalServerError {
		s.logger.Warn("failed to delete a chat", "session", id, "status", status, "err", err)
		w.Header().Set("Retry-After", "5")
	} else {
		s.logRefusal(slog.LevelInfo, "chat deletion refused", "session", id, "status", status, "err", err)
	}
	frontend.Text(w, err.Error(), status)
}

// deleteStatus is a failed deletion's answer: its status, and what the
// browser reads.
func deleteStatus(id string, err error) (int, error) {
	var coded interface{ StatusCode() int } // another node's answer, as it gave it (a chatError)
	switch {
	case errors.As(err, &coded):
		return coded.StatusCode(), err
	case errors.Is(err, engine.ErrNoSession):
		return http.StatusNotFound, fmt.Errorf("%w: there is no chat %q for this browser", errUnknownSession, id)
	case errors.Is(err, engine.ErrOwnedElsewhere):
		return http.StatusServiceUnavailable, fmt.Errorf("chat %q runs on another gateway node, which did not delete it: retry: %w", id, err)
	case errors.Is(err, engine.ErrSessionClosed):
		return http.StatusServiceUnavailable, errors.New("the gateway is shutting down: retry")
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, fmt.Errorf("chat %q was not deleted within %v: retry", id, deleteTimeout)
	case errors.Is(err, engine.ErrStoreUnavailable):
		return http.StatusServiceUnavailable, fmt.Errorf("chat %q is not deleted: %w: retry", id, err)
	}
	return http.StatusInternalServerError, fmt.Errorf("chat %q is not deleted: %w", id, err)
}
