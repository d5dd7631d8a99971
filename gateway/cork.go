package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
)

// corkConn is the network connection under a page's WebSocket. The
// WebSocket library flushes every message it writes; while the page's
// writer holds the cork, those flushes collect in one buffer instead, and
// uncork writes them all with one write system call. The writer corks
// around each batch of frames it has ready, so a burst of frames costs one
// write(2) on each side instead of one a frame. The frames and their order
// are the same, byte for byte.
//
// Writes of other goroutines (the library's pongs, pings and close frame)
// while corked join the buffer and go out with the batch; the writer
// uncorks before it waits for anything. The buffer is taken from a pool at
// the first corked write and given back at uncork: an idle page holds none.
type corkConn struct {
	net.Conn
	raw syscall.RawConn // Conn's, for writes that must not block; nil: none
	// stuck counts the server's writers waiting on a socket that did not
	// take their batch at once (a page that reads slowly, or not at all):
	// they are not at work for the other pages (conn.writeNow). Nil:
	// counted nowhere.
	stuck  *atomic.Int64
	mu     sync.Mutex
	corked bool
	held   bool    // corked by a publisher (corkNow), or for the writer after it: writes only collect
	buf    *[]byte // while corked and written to

	// uncorkNow's write (c.mu held): the bytes, how many went, the error,
	// and the callback that writes them, made once per connection rather
	// than a closure at every write.
	nowB   []byte
	nowN   int
	nowErr error
	nowFn  func(fd uintptr) bool
}

// newCorkConn corks conn, a hijacked connection; stuck counts its
// writer while the socket makes it wait.
func newCorkConn(conn net.Conn, stuck *atomic.Int64) *corkConn {
	c := &corkConn{Conn: conn, stuck: stuck}
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return c
}

// corkBufs are the buffers of connections that are writing.
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledCork bounds what collects while corked: past it, the buffer is
// written at once; and it is the largest buffer given back to the pool.
const maxPooledCork = 64 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		// The library's own frames (a ping, a pong, a close frame), not a
		// writer's: not counted in stuck (it counts the writers, which
		// write corked).
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBufs.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	if len(*c.buf) < maxPooledCork || c.held {
		return len(p), nil
	}
	// A long batch (a replay) goes out in parts, not all in memory.
	err := c.send(*c.buf)
	*c.buf = (*c.buf)[:0]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// send writes b whole, c.mu held: what the socket takes at once, then the
// rest waiting for it, counted in stuck meanwhile.
func (c *corkConn) send(b []byte) error {
	if c.raw == nil || c.stuck == nil {
		_, err := c.Conn.Write(b)
		return err
	}
	n, err := c.writeAtOnce(b)
	if err != nil || n == len(b) {
		return err
	}
	c.stuck.Add(1)
	defer c.stuck.Add(-1)
	_, err = c.Conn.Write(b[n:])
	return err
}

// cork makes writes collect until uncork. The writer corks: a long batch
// goes out in parts as it grows, after what a publisher's uncorkNow left.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked, c.held = true, false
	c.mu.Unlock()
}

// uncork writes what collected, with one system call, and lets writes
// through again. Its error is the write's: the frames written while
// corked did not all reach the socket.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked, c.held = false, false
	if c.buf == nil {
		return nil
	}
	err := c.send(*c.buf)
	c.releaseBuf()
	return err
}

// corkNow corks for a batch written by a goroutine that must not block
// (conn.writeNow): until uncorkNow, writes only collect, whatever their
// length. It reports false when the connection cannot write without
// blocking, is corked already, or is busy: an uncorked write (a pong, a
// ping, a close frame) holds the lock while the socket makes it wait.
func (c *corkConn) corkNow() bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	if c.raw == nil || c.corked {
		return false
	}
	c.corked, c.held = true, true
	return true
}

// uncorkNow writes what collected since corkNow as far as the socket takes
// it at once. done: all of it went, and writes go through again.
// Otherwise the rest stays in the buffer, still held, and the writer's
// cork and uncork write it first: what others write meanwhile (a pong, a
// close frame) collects after it, without waiting for the socket.
func (c *corkConn) uncorkNow() (done bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		c.corked, c.held = false, false
		return true, nil
	}
	b := *c.buf
	n, err := c.writeAtOnce(b)
	if err != nil {
		return false, err
	}
	if n < len(b) {
		*c.buf = b[:copy(b, b[n:])]
		return false, nil
	}
	c.corked, c.held = false, false
	c.releaseBuf()
	return true, nil
}

// writeAtOnce writes what the socket takes of b without waiting, c.mu
// held, and says how much.
func (c *corkConn) writeAtOnce(b []byte) (int, error) {
	if c.nowFn == nil {
		c.nowFn = c.writeSome
	}
	c.nowB, c.nowN, c.nowErr = b, 0, nil
	err := c.raw.Write(c.nowFn)
	n := c.nowN
	if err == nil {
		err = c.nowErr
	}
	c.nowB, c.nowErr = nil, nil
	if err != nil {
		return n, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return n, nil
}

// writeSome writes what it can of c.nowB to fd without waiting, counting
// it in c.nowN: the rest waits for the writer. c.mu is held.
func (c *corkConn) writeSome(fd uintptr) bool {
	for c.nowN < len(c.nowB) {
		m, err := syscall.Write(int(fd), c.nowB[c.nowN:])
		if m > 0 {
			c.nowN += m
		}
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			return true // the rest waits for the writer
		case err != nil:
			c.nowErr = err
			return true
		case m == 0:
			return true
		}
	}
	return true
}

// releaseBuf gives the emptied buffer back; c.mu is held.
func (c *corkConn) releaseBuf() {
	b := c.buf
	c.buf = nil
	if cap(*b) <= maxPooledCork {
		*b = (*b)[:0]
		corkBufs.Put(b)
	}
}

// corkWriter lets the WebSocket upgrade hijack a corkConn instead of the
// bare connection; hijacked is it, once the upgrade is done.
type corkWriter struct {
	http.ResponseWriter
	stuck    *atomic.Int64 // the server's (corkConn.stuck)
	hijacked *corkConn
}

// The buffers the WebSocket library reads and writes a page's socket
// through, for as long as the page is connected. net/http's are 4 KiB
// each, and an idle page would hold both. The write side needs room for a
// frame's header and a short frame only: the cork collects a batch's
// frames, and a longer frame goes past the buffer straight into the cork's.
// A read takes what the socket holds up to socketReadBuf: a page's usual
// frame (a tool.result, a message) in one read(2), a longer one in two,
// its rest read straight into the frame's own buffer.
const (
	socketReadBuf  = 512
	socketWriteBuf = 256
)

// Hijack hands the WebSocket library the corked connection and small
// buffers of its own (see socketReadBuf); bytes the client sent right
// after its upgrade request, already read into net/http's buffer, are read
// first.
func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	w.hijacked = newCorkConn(conn, w.stuck)
	br := bufio.NewReaderSize(conn, socketReadBuf)
	if n := brw.Reader.Buffered(); n > 0 {
		// Into the new buffer, as buffered bytes: the library looks for
		// them there.
		early, _ := brw.Reader.Peek(n)
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(early), conn), max(n, socketReadBuf))
		if _, err := br.Peek(n); err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
	}
	return w.hijacked, bufio.NewReadWriter(br, bufio.NewWriterSize(w.hijacked, socketWriteBuf)), nil
}

func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
