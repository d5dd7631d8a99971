package gateway

import (
	"bytes"
	"net"
	"sync"
	"testing"
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
