package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestLoadFailureLevel: a session the store could not load while it is
// unavailable (NATS away, a cluster without its quorum) is logged at WARN
// by /ws and the front ends alike, where the front ends said ERROR for
// what the store's health already says; anything else is ERROR.
func TestLoadFailureLevel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: failed to take session s1's lease: nats: no response from stream", engine.ErrStoreUnavailable), "level=WARN"},
		{errors.New("something the gateway did not expect"), "level=ERROR"},
	} {
		var out bytes.Buffer
		logLoadFailure(slog.New(slog.NewTextHandler(&out, nil)), "s1", tc.err)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v logged as %q, want %s", tc.err, out.String(), tc.want)
		}
	}
}
