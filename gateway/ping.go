package gateway

import (
	"context"
	"time"

	"github.com/clienttools/gateway/engine"
)

// armPing schedules the next keepalive ping. A timer, not a goroutine per
// connection: an idle connection should cost as little as possible.
func (c *conn) armPing() {
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if !c.pingsStopped {
		c.pingTimer = time.AfterFunc(c.s.opts.PingInterval, c.ping)
	}
}

// ping runs in the timer's goroutine: it waits for the pong, closes a peer
// that does not answer in time (its page detaches, and the calls it ran
// move to another page), and schedules the next ping.
func (c *conn) ping() {
	c.pingMu.Lock()
	if c.pingsStopped {
		c.pingMu.Unlock()
		return
	}
	c.pinging.Add(1)
	c.pingMu.Unlock()
	defer c.pinging.Done()
	c.mu.Lock()
	handed, busy := c.handed, c.handling
	c.mu.Unlock()
	slowed := c.slowed.Load()
	// Not c.ctx: see conn.ctx. Once the socket closes, Ping returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), c.s.opts.PingInterval)
	err := c.ws.Ping(ctx)
	cancel()
	if c.ctx.Err() != nil {
		return
	}
	if err != nil {
		c.mu.Lock()
		waiting := busy || c.handling || c.handed != handed // the reader waited on the session during the ping
		handling := c.handling
		c.mu.Unlock()
		flooded := pongBehindRefused(slowed, c.slowed.Load(), handling)
		if waiting && !flooded {
			// The reader, which reads pongs, waits on the session (a
			// load from a slow store, a worker deciding): the page is
			// not the one that stopped. The next ping asks again.
			c.logger.Debug("no pong while the reader waits on the session", "err", err)
			c.armPing()
			return
		}
		if flooded {
			c.sessionLogger().Info("browser's pong waits behind the refused frames it sent, closing", "err", err)
		} else {
			c.sessionLogger().Info("browser stopped answering pings, closing", "err", err)
		}
		c.close(engine.CloseUnresponsive, "ping timeout")
		// A page that answers nothing may not take the close handshake
		// either: do not keep its calls waiting for the 5s it may take.
		c.mu.Lock()
		page := c.page
		c.mu.Unlock()
		if page != nil {
			page.Detach()
		}
		return
	}
	c.armPing()
}

// stopPings cancels the next ping and waits for one in flight.
func (c *conn) stopPings() {
	c.pingMu.Lock()
	c.pingsStopped = true
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	c.pingMu.Unlock()
	c.pinging.Wait()
}

// pongBehindRefused says whether an unanswered ping's pong waits behind the
// page's own refused frames, from the reader's pauses for them (conn.slowed:
// odd while one runs) when the ping went and when it failed, and whether
// the reader hands a frame to the session now. It does while the reader
// pauses, or when it paused meanwhile and now reads the next frame: the
// page floods, and its backlog could take hours to read at RefusedRate
// (an outside audit), so the page is closed as one that does not answer,
// and reconnects. Not when it paused meanwhile but now waits on the session
// (a session.open the worker decides): that wait is the session's, and a
// few refused frames before it are no flood (a review).
func pongBehindRefused(before, now int64, handling bool) bool {
	return now%2 == 1 || now != before && !handling
}
