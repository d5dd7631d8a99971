package frontend

import (
	"context"
	"encoding/json"

	"github.com/clienttools/gateway/engine"
)

// Calls is what a response knows of its tool calls for the pending-call
// rule: which are open, which of those are client calls delivered to this
// stream (tool.call), and which calls sub-agents made. The zero value is
// ready to use.
type Calls struct {
	state  map[string]callState
	parent map[string]string // call id → the call its sub-agent answers
	shown  map[string]bool   // a sub-agent's client calls the front end shows
}

type callState uint8

const (
	callOpen     callState = iota
	callMine               // a client attempt is delivered to this stream and waits
	callAsking             // its approval is asked of this stream's app and waits (Asked)
	callFinished           // tool.finished: it stays so
)

// See notes what ev, one of every frame in order, says of the calls that
// the front end does not show: which calls sub-agents make, and tool.cancel
// (the attempt no longer waits on this stream). It reports whether the
// front end shows ev: the session's own agent's events, and a sub-agent's
// client calls, not its text or worker calls.
func (c *Calls) See(ev engine.Event) bool {
	if !c.visible(ev) {
		return false
	}
	if ev.Type == engine.FrameToolCancel {
		var e engine.ToolCancelFrame
		if json.Unmarshal(ev.Frame, &e) == nil && c.state[e.ID] == callMine {
			c.state[e.ID] = callOpen
		}
	}
	return true
}

// Started notes a call the response saw (tool.started): open unless it
// finished.
func (c *Calls) Started(id string) {
	if c.state == nil {
		c.state = map[string]callState{}
	}
	if _, ok := c.state[id]; !ok {
		c.state[id] = callOpen
	}
}

// Delivered notes a tool.call delivered to this stream, and reports
// whether the client is to run it. One with bad input (Proposed) is not:
// it is answered with the ready-made error, as the /ws SDK does by
// default, and its outcome follows in tool.finished.
func (c *Calls) Delivered(ctx context.Context, page *engine.Page, e engine.ClientCall) bool {
	c.Started(e.ID)
	if e.Proposed != nil {
		p := *e.Proposed
		p.ID, p.Attempt = e.ID, e.Attempt
		_ = page.Answer(ctx, p)
		return false
	}
	if c.state[e.ID] != callFinished {
		c.state[e.ID] = callMine
	}
	return true
}

// Asked notes a call whose approval this stream asked of the app (a
// front end that asks it: the AI SDK's): the response may end waiting for
// it, as for a client call it delivered.
func (c *Calls) Asked(id string) {
	c.Started(id)
	if c.state[id] != callFinished {
		c.state[id] = callAsking
	}
}

// Finished notes a call's tool.finished.
func (c *Calls) Finished(id string) {
	c.Started(id)
	c.state[id] = callFinished
}

// Open is how many calls are open.
func (c *Calls) Open() int {
	n := 0
	for _, s := range c.state {
		if s != callFinished {
			n++
		}
	}
	return n
}

// Pending names the open calls when the response waits only on client
// calls this stream delivered, or on approvals it asked (a delegated call
// waits on its sub-agent, which may wait on them); nil otherwise.
func (c *Calls) Pending() []string {
	var mine []string
	for id, s := range c.state {
		if s == callMine || s == callAsking {
			mine = append(mine, id)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	for id, s := range c.state {
		if s == callOpen && !c.waiting(id, mine) {
			return nil
		}
	}
	return mine
}
