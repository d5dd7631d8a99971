package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// MaxPayload is the servers' max_payload: the journal's largest message,
// jetstream.MaxMessage (which this package cannot import: the store's own
// tests use it).
const MaxPayload = 8 << 20

// Server starts a NATS server with users (nil: none), stopped when t ends,
// and returns its client URL.
func Server(t testing.TB, users []*server.User) string {
	t.Helper()
	return Start(t, func(o *server.Options) { o.Users = users })
}

// Start starts a NATS server as Server does, with its options edited by
// edit first (a smaller max_payload, say), and returns its client URL.
func Start(t testing.TB, edit func(*server.Options)) string {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, MaxPayload: MaxPayload}
	edit(o)
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}
