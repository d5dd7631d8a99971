// Package natstest starts a NATS server with JetStream for tests, as the
// gateway's nodes share one on a cluster: on loopback, a port of its own,
// its files in the test's temporary directory, and messages as large as
// the journal's batches (jetstream.MaxBatch).
//
// Concurrency: Server is called from a test's goroutine; the server it
// starts stops when the test ends.
package natstest

import (
	"testing"
	"time"

	"github.com/clienttools/gateway/store/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// Server starts a NATS server with users (nil: none), stopped when t ends,
// and returns its client URL.
func Server(t testing.TB, users []*server.User) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, MaxPayload: jetstream.MaxBatch, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}
