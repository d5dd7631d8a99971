package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/coder/websocket"
)

// leftThisNode is the close reason of a page whose session left this
// node: its lease lapsed (a pause, NATS out of reach, its leader
// elected) or was handed over. Another node may run it now, or will once
// it is loaded again: the page reconnects either way.
const leftThisNode = "the session left this gateway node (its lease lapsed, or was handed over): reconnect"

// reply queues a frame of the gateway's own, waiting for room.
func (c *conn) reply(typ string, frame json.RawMessage) {
	for {
		c.mu.Lock()
		if len(c.replies) < maxReplies {
			c.replies = append(c.replies, engine.Event{Type: typ, Frame: frame})
			c.mu.Unlock()
			c.kick()
			return
		}
		c.mu.Unlock()
		select {
		case <-c.room:
		case <-c.ctx.Done():
			return
		}
	}
}

// kick starts the writer unless one is running. It is the page's Wake, so
// it may be called with the session's event lock held: it never blocks.
func (c *conn) kick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.page != nil && c.tooSlow(c.page) {
		return
	}
	if c.writing || c.stopped || c.ctx.Err() != nil {
		return
	}
	c.writing = true
	c.writers.Add(1)
	c.s.writers.Go(c.write)
}

// write drains the replies and the page's stream, in order, and returns
// when both are empty: an idle connection has no writer goroutine. What is
// ready at each round goes out as one batch (see writeBatch).
func (c *conn) write() {
	defer c.writers.Done()
	var frames []engine.Event
	for {
		// Let what is runnable run before taking the frames: under load,
		// that is often the session's next step or its model turn, about
		// to add frames to this page, and they join this batch's one
		// write(2) instead of making their own (1,000 busy sessions: 40%
		// more calls a second at a quarter less CPU a call, bench run in
		// docs/benchmarks.md). With nothing else runnable it returns at
		// once; with others it costs the batch their turn (p90 of a lone
		// page's round trip +100 µs, p50 unchanged).
		runtime.Gosched()
		c.mu.Lock()
		replies, early := c.replies, c.beforePage
		c.replies, c.beforePage = nil, 0
		page := c.page
		c.mu.Unlock()
		if replies != nil {
			select {
			case c.room <- struct{}{}:
			default:
			}
		}
		closing := false
		frames = frames[:0]
		ok := c.writeBatch(func() bool {
			if end := slices.IndexFunc(replies, func(r engine.Event) bool { return r.Frame == nil }); end >= 0 { // closeAfterReplies
				closing = c.writeFrames(replies[:end], true)
				return closing
			}
			// A reply answers a frame read after the page's frames
			// taken here were queued, or before the page attached.
			if !c.writeFrames(replies[:early], true) {
				return false
			}
			if page != nil {
				if frames = page.Take(frames); !c.writeFrames(frames, true) {
					return false
				}
			}
			return c.writeFrames(replies[early:], true)
		})
		// The array goes back to the page at the next Take, and stays
		// with it while the page is idle: it must not keep the frames
		// just written alive.
		clear(frames)
		if closing {
			c.mu.Lock()
			code, reason := c.closeCode, c.closeReason
			c.mu.Unlock()
			c.close(code, reason)
			return
		}
		if !ok {
			return
		}
		if len(replies) > 0 || len(frames) > 0 {
			continue
		}
		if page != nil && c.ended(page) {
			return
		}
		if !c.stopWriting(page, true) {
			return
		}
	}
}

// stopWriting ends a writer's turn, unless there is more for it: replies,
// the page attached since it read c.page (its kick saw the writer
// running), or written (false: a write the socket did not take whole).
// Once stopped, a frame queued on the page meanwhile (its wake found the
// writer running) gets a writer of its own.
func (c *conn) stopWriting(page *engine.Page, written bool) (more bool) {
	c.mu.Lock()
	more = !written || len(c.replies) > 0 || c.page != page
	if !more {
		c.writing = false
	}
	c.mu.Unlock()
	if !more && page != nil && page.Queued() > 0 {
		c.kick()
	}
	return more
}

// writeNow is the page's WriteNow: while no page's writer is at work (a
// writer waiting on a socket that does not take its batch, a page that
// reads slowly or not at all, is not: it would have every page's frames
// wait for writers, whose bursts overflow healthy pages' queues), the
// session's events just queued go out on the goroutine that published
// them, with one write(2) the socket takes at once, sparing the writer's
// wake-up and the thread the scheduler would wake for it: a lone page's
// round trip and stream. While a writer is at work, the events wait for a
// writer, which batches what several steps queue into one write (see
// write). Anything more is the writer's too: a writer running for this
// page (it looks at the page again before it stops), replies waiting, a
// page that ended, a socket that does not take the whole batch (the rest
// stays corked for the writer, which writes it first), and every frame of
// a compressed socket, whose deflate must not hold the session.
func (c *conn) writeNow() {
	if c.compressed {
		c.kick()
		return
	}
	c.mu.Lock()
	if c.writing || c.stopped || c.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	page := c.page
	if c.s.writers.Busy() > int(c.s.stuckWriters.Load()) || page == nil || len(c.replies) > 0 || c.cork == nil || page.Err() != nil || !c.cork.corkNow() {
		c.mu.Unlock()
		c.kick()
		return
	}
	c.writing = true
	c.writers.Add(1)
	c.mu.Unlock()

	buf := frameLists.Get().(*[]engine.Event)
	frames := page.Take(*buf)
	ok := c.writeFrames(frames, false)
	clear(frames)
	*buf = frames[:0]
	frameLists.Put(buf)
	done, err := c.cork.uncorkNow()
	if err != nil || !ok {
		c.close(engine.CloseGoingAway, "write failed")
		done = false
	}
	if c.stopWriting(page, done) {
		c.s.writers.Go(c.write) // it has writing, and the writers' count
		return
	}
	c.writers.Done()
}

// frameLists are the arrays writeNow takes a page's frames into; each
// goes to the page at the Take, and the page's comes back.
var frameLists = sync.Pool{New: func() any { return new([]engine.Event) }}

// writeBatch runs f, which writes frames, with the socket corked: the
// frames go out in one write system call when f returns. WriteTimeout
// bounds each frame (writeFrame re-arms it) and the final write: a peer
// that stops reading loses its socket.
// It reports false once the connection is closing.
func (c *conn) writeBatch(f func() bool) bool {
	if c.stuck == nil {
		c.stuck = time.AfterFunc(c.s.opts.WriteTimeout, c.writeTimedOut)
	} else {
		c.stuck.Reset(c.s.opts.WriteTimeout)
	}
	defer c.stuck.Stop()
	if c.ctx.Err() != nil {
		if c.cork != nil {
			// What writeNow left corked, and the close frame after it.
			_ = c.cork.uncork()
		}
		return false
	}
	if c.cork == nil {
		return f()
	}
	c.cork.cork()
	ok := f()
	// Always uncork: a close frame written meanwhile waits in the buffer.
	if err := c.cork.uncork(); err != nil && ok {
		c.close(engine.CloseGoingAway, "write failed")
		return false
	}
	return ok
}

// tooSlow closes the connection at once when the session dropped the page
// for falling behind: the writer may be stuck on a page that reads nothing.
// The close frame still follows the frame being written.
func (c *conn) tooSlow(page *engine.Page) bool {
	if !errors.Is(page.Err(), engine.ErrSlowSubscriber) {
		return false
	}
	if c.ctx.Err() == nil {
		c.logger.Warn("browser too slow, closing", "session", c.session.ID(), "page", page.ID(), "queue", c.s.opts.SendQueue)
		c.close(engine.CloseTooSlow, reasonTooSlow)
	}
	return true
}

// ended closes the connection when the session ended and everything
// before session.ended is written, and reports whether the writer is done.
// A frame the reader is handing to the session meanwhile is answered first
// (session_closed, say: every refused frame gets its reply): the close
// waits for its reply (endWhenHandled), and the writer goes on.
func (c *conn) ended(page *engine.Page) bool {
	select {
	case <-page.Done():
	default:
		return false
	}
	var end closeRequest
	switch err := page.Err(); {
	case errors.Is(err, engine.ErrSessionClosed):
		end = closeRequest{engine.CloseNormal, "the session ended"}
	case errors.Is(err, engine.ErrUnloaded):
		// The session left this node (its lease was lost): it runs
		// elsewhere from its journal.
		end = closeRequest{engine.CloseElsewhere, leftThisNode}
	default:
		return true
	}
	c.mu.Lock()
	if c.handling {
		c.endAfter = &end
		c.mu.Unlock()
		return false
	}
	c.mu.Unlock()
	c.close(end.code, end.reason)
	return true
}

// closeRequest is a close the connection owes its page.
type closeRequest struct {
	code   engine.CloseCode
	reason string
}

// endWhenHandled closes the connection after the replies queued, the
// frame just handled's among them, when the session's stream ended while
// the reader handed it over (ended).
func (c *conn) endWhenHandled() {
	c.mu.Lock()
	c.handling = false
	c.handed++
	end := c.endAfter
	c.endAfter = nil
	c.mu.Unlock()
	if end != nil {
		c.closeAfterReplies(end.code, end.reason)
	}
}

const reasonTooSlow = "the connection could not keep up: reconnect and resume"

// writeFrames writes frames in order, in a batch, counting each. timed:
// the batch is the writer's, under its WriteTimeout (writeNow's only
// fills the cork's buffer). It reports false once the connection is
// closing.
func (c *conn) writeFrames(frames []engine.Event, timed bool) bool {
	for _, ev := range frames {
		if !c.writeFrame(ev.Frame, timed) {
			return false
		}
		if ev.Type != "" { // a relayed frame's, which its serving node counted
			c.s.opts.Metrics.FrameOut(ev.Type)
		}
	}
	return true
}

// writeFrame writes one frame, in a batch; see writeFrames.
func (c *conn) writeFrame(frame json.RawMessage, timed bool) bool {
	if c.ctx.Err() != nil {
		return false
	}
	// Each frame gets the whole WriteTimeout: a long replay written in a
	// batch is not cut off for its length, only a peer that stops reading.
	if timed && c.stuck != nil {
		c.stuck.Reset(c.s.opts.WriteTimeout)
	}
	// Not c.ctx: see conn.ctx.
	if err := c.ws.Write(context.Background(), websocket.MessageText, frame); err != nil {
		if errors.Is(err, errNoParts) {
			// A relayed page on a node of an earlier version: closed to
			// reconnect, maybe to this node, rather than moved between the
			// two again (1001), or sent a frame it would cut.
			c.logger.Warn("relayed page closed: its node runs an earlier version, which cannot take this frame", "err", err)
			c.close(engine.CloseTooSlow, "a frame too large for the relay to this gateway node: reconnect")
			return false
		}
		c.close(engine.CloseGoingAway, "write failed")
		return false
	}
	return true
}

func (c *conn) writeTimedOut() {
	c.sessionLogger().Warn("write timed out, dropping the connection", "timeout", c.s.opts.WriteTimeout)
	_ = c.ws.CloseNow()
}
