package natstest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Member is one server of a Cluster, which a test may stop and start again
// (a NATS server that dies and comes back, with its files).
type Member struct {
	Name string // the server's name: n1, n2, …
	URL  string // its client URL, the same across restarts
	opts server.Options
	ns   *server.Server
}

// Cluster runs n NATS servers with JetStream, clustered on loopback, each
// stopped when t ends, and returns them once every one answers JetStream
// requests (its meta leader elected).
func Cluster(t testing.TB, n int) []*Member {
	t.Helper()
	routes := make([]*url.URL, n)
	ports := make([]int, n)
	for i := range n {
		ports[i] = FreePort(t)
		routes[i], _ = url.Parse("nats://127.0.0.1:" + strconv.Itoa(ports[i]))
	}
	members := make([]*Member, n)
	for i := range n {
		m := &Member{Name: fmt.Sprintf("n%d", i+1), opts: server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: FreePort(t),
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, MaxPayload: MaxPayload,
			Cluster: server.ClusterOpts{Name: "gateway", Host: "127.0.0.1", Port: ports[i]},
			Routes:  routes,
		}}
		m.URL = "nats://127.0.0.1:" + strconv.Itoa(m.opts.Port)
		m.Start(t)
		t.Cleanup(m.Stop)
		members[i] = m
	}
	deadline := time.Now().Add(time.Minute)
	for _, m := range members {
		for !jetStreamAnswers(m.URL) {
			if time.Now().After(deadline) {
				t.Fatal("the NATS cluster's JetStream did not come up")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return members
}

// URLs is the members' client URLs, in order.
func URLs(members []*Member) []string {
	urls := make([]string, len(members))
	for i, m := range members {
		urls[i] = m.URL
	}
	return urls
}

// Start starts m, stopped or not yet started, with its files as they were.
func (m *Member) Start(t testing.TB) {
	t.Helper()
	opts := m.opts // a server keeps its options, and writes to them
	ns, err := server.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		t.Fatalf("NATS server %s did not start", m.Name)
	}
	m.ns = ns
}

// Stop shuts m down (its files stay): its clients and peers see it go, as
// they would a kill, but it hands what it leads to another server first,
// where a crashed one leaves it without a leader until the others elect
// one (4 to 9 s: nats-server's election timeout). Stopping a stopped
// member does nothing.
func (m *Member) Stop() {
	if m.ns != nil {
		m.ns.Shutdown()
		m.ns.WaitForShutdown()
		m.ns = nil
	}
}

// FreePort is a loopback port no one listens on now, for a server to
// take later (a process started with it, one restarted on it). It is
// below the kernel's ephemeral range (32768 on, on Linux): a port that a
// listen on port 0 gave, closed for the server to take, could be given to
// another socket first (a client's connection takes one too), and the
// server failed to listen ("address already in use") with the packages'
// tests run side by side.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free loopback port from 20000 to 32000")
	return 0
}

// jetStreamAnswers reports whether the server at u answers a JetStream
// request.
func jetStreamAnswers(u string) bool {
	nc, err := nats.Connect(u)
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err == nil
}
