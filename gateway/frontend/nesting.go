package frontend

import (
	"bytes"
	"encoding/json"

	"github.com/clienttools/gateway/engine"
)

// The front ends show one conversation: the session's own agent's. A
// sub-agent's events (docs/subagents.md) carry "parent", the call it
// answers; its text and its worker calls are its own business, but a
// client call it makes is the front end's to run, like any other.

// visible reports whether the front end shows ev: every event of the
// session's own agent, and of a sub-agent only its client calls
// (tool.started with handler client, then that call's tool.call,
// tool.cancel and tool.finished). It notes the parent of every call a
// sub-agent starts, for waiting.
func (c *Calls) visible(ev engine.Event) bool {
	if !bytes.Contains(ev.Frame, []byte(`"parent"`)) {
		return true // the session's own agent's: no member of that name
	}
	var m struct {
		ID      string `json:"id"`
		Parent  string `json:"parent"`
		Handler string `json:"handler"`
	}
	if json.Unmarshal(ev.Frame, &m) != nil || m.Parent == "" {
		return true
	}
	switch ev.Type {
	case engine.EventToolStarted:
		if c.parent == nil {
			c.parent, c.shown = map[string]string{}, map[string]bool{}
		}
		c.parent[m.ID] = m.Parent
		if m.Handler == string(engine.HandlerClient) {
			c.shown[m.ID] = true
		}
		return c.shown[m.ID]
	case engine.FrameToolCall, engine.FrameToolCancel, engine.EventToolFinished:
		return c.shown[m.ID]
	}
	return false
}

// waiting reports whether the open call id waits only on one of the calls
// in mine: its sub-agent (or one of that sub-agent's) made one of them. A
// delegated call whose sub-agent waits for the browser to run a tool is
// then as pending as that tool.
func (c *Calls) waiting(id string, mine []string) bool {
	for _, m := range mine {
		for p, ok := c.parent[m]; ok; p, ok = c.parent[p] {
			if p == id {
				return true
			}
		}
	}
	return false
}
