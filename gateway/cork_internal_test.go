package gateway

import (
	"bytes"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writesConn records each Write it gets: one system call each.
type writesConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (w *writesConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// Frames written while corked reach the socket in one write, in order,
// when the batch ends; outside a batch every write goes straight through.
func TestCorkBatchesWrites(t *testing.T) {
	under := &writesConn{}
	c := &corkConn{Conn: under}
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	c.cork()
	for _, f := range []string{"b", "cc", "ddd"} {
		if n, err := c.Write([]byte(f)); err != nil || n != len(f) {
			t.Fatalf("corked Write(%q) = %d, %v", f, n, err)
		}
	}
	if len(under.writes) != 1 {
		t.Fatalf("%d writes reached the socket while corked, want only the one before", len(under.writes))
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "bccddd", "e"}
	if len(under.writes) != len(want) {
		t.Fatalf("writes %q, want %q", under.writes, want)
	}
	for i, w := range want {
		if string(under.writes[i]) != w {
			t.Errorf("write %d is %q, want %q", i, under.writes[i], w)
		}
	}
	if c.buf != nil {
		t.Error("the connection holds its batch buffer after the batch: an idle page should hold none")
	}
}

// A batch larger than the limit goes out in parts as it grows, every byte
// once and in order.
func TestCorkFlushesLongBatches(t *testing.T) {
	under := &writesConn{}
	c := &corkConn{Conn: under}
	c.cork()
	frame := bytes.Repeat([]byte("x"), 1000)
	var sent []byte
	for i := range 200 {
		frame[0] = byte('a' + i%26)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, frame...)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(under.writes) < 2 {
		t.Errorf("%d writes for %d bytes, want the batch in parts of at most about %d", len(under.writes), len(sent), maxPooledCork)
	}
	if got := bytes.Join(under.writes, nil); !bytes.Equal(got, sent) {
		t.Errorf("the socket got %d bytes, not the %d written in order", len(got), len(sent))
	}
}

// uncork with nothing written writes nothing.
func TestUncorkEmpty(t *testing.T) {
	under := &writesConn{}
	c := &corkConn{Conn: under}
	c.cork()
	if err := c.uncork(); err != nil || len(under.writes) != 0 {
		t.Errorf("uncork of an empty batch: %v, %d writes", err, len(under.writes))
	}
}

// tcpPair is a loopback TCP connection's two ends.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// A batch the socket takes at once goes out whole at uncorkNow, and writes
// go straight through after it.
func TestUncorkNowWhole(t *testing.T) {
	server, client := tcpPair(t)
	c := newCorkConn(server, nil)
	if !c.corkNow() {
		t.Fatal("corkNow refused a TCP connection")
	}
	if c.corkNow() {
		t.Error("corkNow corked twice")
	}
	for _, f := range []string{"a", "bb"} {
		if _, err := c.Write([]byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if done, err := c.uncorkNow(); !done || err != nil {
		t.Fatalf("uncorkNow of 3 bytes: done %v, %v", done, err)
	}
	if _, err := c.Write([]byte("c")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "abbc" {
		t.Errorf("read %q, %v; want abbc", got, err)
	}
	if c.buf != nil || c.corked {
		t.Error("the batch's buffer or cork outlived a batch written whole")
	}
}

// A batch larger than the socket takes at once: uncorkNow writes what it
// can without waiting and leaves the rest corked, so a write of another
// goroutine meanwhile (a pong) goes after it, never into its middle, and
// does not wait for the socket; the writer's batch sends the rest, then
// its own, every byte once and in order.
func TestUncorkNowLeavesTheRest(t *testing.T) {
	server, client := tcpPair(t)
	if err := server.SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	c := newCorkConn(server, nil)
	if !c.corkNow() {
		t.Fatal("corkNow refused a TCP connection")
	}
	batch := make([]byte, 8<<20)
	for i := range batch {
		batch[i] = byte(i % 251)
	}
	// In parts past maxPooledCork: held, they only collect.
	for part := range slices.Chunk(batch, 100<<10) {
		if _, err := c.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	done, err := c.uncorkNow()
	if err != nil || done {
		t.Fatalf("uncorkNow of %d bytes to a socket nobody reads: done %v, %v; want the rest left", len(batch), done, err)
	}
	// Nobody reads yet: this must not wait for the socket.
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		read <- b
	}()
	c.cork() // the writer's batch
	if _, err := c.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	server.Close()
	want := append(batch, "pongnext"...)
	if got := <-read; !bytes.Equal(got, want) {
		t.Errorf("the peer read %d bytes, not the %d written, in order", len(got), len(want))
	}
}

// A connection with no file descriptor (a test's, a TLS one) never writes
// from a publisher: corkNow refuses it.
func TestCorkNowNeedsASocket(t *testing.T) {
	if newCorkConn(&writesConn{}, nil).corkNow() {
		t.Error("corkNow took a connection it cannot write to without blocking")
	}
}

// A writer whose batch the socket does not take at once (a page that reads
// nothing) is counted stuck while it waits, and only then: it is not at
// work for the other pages, whose frames then go out on the goroutine that
// published them (conn.writeNow), not through the writers (an outside
// audit: a page that read nothing had healthy pages of other browsers
// closed with 1008).
func TestAWriterWaitingOnItsSocketIsStuck(t *testing.T) {
	server, client := tcpPair(t)
	if err := server.SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	var stuck atomic.Int64
	c := newCorkConn(server, &stuck)

	c.cork() // a batch the socket takes: never stuck
	if _, err := c.Write([]byte("small")); err != nil {
		t.Fatal(err)
	}
	if err := c.uncork(); err != nil || stuck.Load() != 0 {
		t.Fatalf("a small batch: uncork %v, stuck %d", err, stuck.Load())
	}
	if _, err := io.ReadFull(client, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}

	c.cork() // a batch nobody reads yet
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 8<<20)) // past maxPooledCork: written as it grows
		wrote <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); stuck.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a writer waiting on a socket nobody reads: stuck %d, want 1", stuck.Load())
		}
	}
	if _, err := io.CopyN(io.Discard, client, 8<<20); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if n := stuck.Load(); n != 0 {
		t.Errorf("stuck %d once the socket took the batch, want 0", n)
	}
}
