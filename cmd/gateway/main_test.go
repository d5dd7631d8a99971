package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(removingTheBinary{m},
		// scs.New starts its memory store's cleanup goroutine, which has no
		// race-free way to stop; see gateway.Options.Sessions.
		goleak.IgnoreTopFunction("github.com/alexedwards/scs/v2/memstore.(*MemStore).startCleanup"),
	)
}

// removingTheBinary runs the tests, then removes the binary they shared.
type removingTheBinary struct{ m *testing.M }

func (r removingTheBinary) Run() int {
	code := r.m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}
