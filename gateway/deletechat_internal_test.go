package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestDeleteStatus: what a browser reads of a deletion that failed: 404
// for a chat it does not have, 503 (to retry) while the store, the node
// that runs the chat or the gateway's stop is in the way, another node's
// answer as that node gave it, and 500 for the rest.
func TestDeleteStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		says   string
	}{
		{fmt.Errorf("%w: no session s1 of this owner's", engine.ErrNoSession), http.StatusNotFound, `there is no chat "s1" for this browser`},
		{&engine.OwnedElsewhereError{Session: "s1", Node: "b"}, http.StatusServiceUnavailable, "runs on another gateway node"},
		{&chatError{status: http.StatusNotFound, err: errors.New("unknown session: there is no chat \"s1\" for this browser")}, http.StatusNotFound, "no chat"},
		{&chatError{status: http.StatusServiceUnavailable, err: errors.New("chat \"s1\" runs on gateway node b, which takes no deletions")}, http.StatusServiceUnavailable, "takes no deletions"},
		{engine.ErrSessionClosed, http.StatusServiceUnavailable, "shutting down"},
		{context.DeadlineExceeded, http.StatusServiceUnavailable, "was not deleted within"},
		{fmt.Errorf("%w: no space left on device", engine.ErrStoreUnavailable), http.StatusServiceUnavailable, "no space left on device"},
		{errors.New("something else"), http.StatusInternalServerError, "is not deleted: something else"},
	} {
		status, err := deleteStatus("s1", tc.err)
		if status != tc.status || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("deleteStatus(%v) = %d %q, want %d saying %q", tc.err, status, err, tc.status, tc.says)
		}
	}
}
