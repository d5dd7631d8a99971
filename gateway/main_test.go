package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// scs.New starts its memory store's cleanup goroutine, which has no
		// race-free way to stop (memstore.StopCleanup reads a field the
		// goroutine sets): one per gateway.New without Options.Sessions.
		goleak.IgnoreTopFunction("github.com/alexedwards/scs/v2/memstore.(*MemStore).startCleanup"),
	)
}
