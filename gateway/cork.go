package gateway

import (
	"bufio"
	"net"
	"net/http"
	"sync"
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
	mu     sync.Mutex
	corked bool
	buf    *[]byte // while corked and written to
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
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBufs.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	if len(*c.buf) < maxPooledCork {
		return len(p), nil
	}
	// A long batch (a replay) goes out in parts, not all in memory.
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// cork makes writes collect until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what collected, with one system call, and lets writes
// through again. Its error is the write's: the frames written while
// corked did not all reach the socket.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.buf == nil {
		return nil
	}
	b := c.buf
	c.buf = nil
	_, err := c.Conn.Write(*b)
	if cap(*b) <= maxPooledCork {
		*b = (*b)[:0]
		corkBufs.Put(b)
	}
	return err
}

// corkWriter lets the WebSocket upgrade hijack a corkConn instead of the
// bare connection; hijacked is it, once the upgrade is done.
type corkWriter struct {
	http.ResponseWriter
	hijacked *corkConn
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = &corkConn{Conn: conn}
	// The library writes through brw.Writer reset onto the returned conn;
	// reset it here too, so nothing can bypass the cork.
	if err := brw.Writer.Flush(); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	brw.Writer.Reset(w.hijacked)
	return w.hijacked, brw, nil
}

func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
