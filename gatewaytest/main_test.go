package gatewaytest_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// scs.New starts its memory store's cleanup goroutine, which has no
		// race-free way to stop: one per gateway without a cookie store of
		// its own (the Memory store).
		goleak.IgnoreTopFunction("github.com/alexedwards/scs/v2/memstore.(*MemStore).startCleanup"),
	)
}
