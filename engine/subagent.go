package engine

import (
	"context"
	"fmt"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/lazylog"
)

// Sub-agents: a worker answers a tool.execute with tool.delegate, and the
// call is answered by a child agent run: its own agent config (model,
// system prompt, tools, limits) and transcript, which starts with the call's
// arguments as its user message. The child's final assistant message is the
// call's result, checked against the tool's output schema; a child that
// fails settles the call with a terminal subagent_failed error.
//
// A child is a *Session value that shares its session's goroutine, event
// log, pages, call registry and wait group: what differs is its agent
// state (agent, transcript, turn, queue, usage, calls in flight). Its
// events carry "parent" (the id of the call it answers), so the page's one
// stream has them in order, nested under the call. Its worker triggers carry
// DecideRequest.Parent. The call's attempt owns the child: the attempt
// ending (a timeout, a cancel, the session ending) stops it, and a retry's
// worker may delegate again, to a fresh child. A child is not in the
// journal's state: after a restart its call resumes as any worker call does
// (docs/subagents.md).

// TypeToolDelegate is the tool.delegate action.
const TypeToolDelegate = "tool.delegate"

// EventToolDelegated: a call's attempt was delegated to a sub-agent.
const EventToolDelegated = "tool.delegated"

// Defaults of the delegation limits.
const (
	// DefaultMaxDepth is Options.MaxDepth's default: a sub-agent's
	// sub-agent's sub-agent may run, no deeper.
	DefaultMaxDepth = 3
	// DefaultMaxFanOut is Options.MaxFanOut's default: sub-agents one
	// agent may have running at once.
	DefaultMaxFanOut = 8
)

// ToolDelegate answers a tool.execute by running a sub-agent: Agent's model
// with Agent's tools, started with Message as its user message (empty: the
// call's raw arguments). ID and Attempt default to the answered tool.execute
// trigger's.
type ToolDelegate struct {
	ID      string      `json:"id,omitempty"`
	Attempt int         `json:"attempt,omitempty"`
	Agent   AgentConfig `json:"agent"`
	Message string      `json:"message,omitempty"`
}

func (ToolDelegate) ActionType() string { return TypeToolDelegate }

func (a ToolDelegate) MarshalJSON() ([]byte, error) {
	type plain ToolDelegate
	return EncodeFrame(TypeToolDelegate, plain(a))
}

// ParentCall says which call a sub-agent answers: DecideRequest.Parent on
// every trigger of a sub-agent.
type ParentCall struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	// Depth is the sub-agent's: 1 for the session's own agent's sub-agent.
	Depth int `json:"depth"`
}

// ToolDelegatedEvent: the call's attempt runs as a sub-agent. Its events
// follow with "parent": ID.
type ToolDelegatedEvent struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Attempt int      `json:"attempt"`
	Model   string   `json:"model"`
	Tools   []string `json:"tools,omitempty"`
	Depth   int      `json:"depth"`
}

// top is the session a sub-agent runs in; the session itself for its own
// agent.
func (s *Session) top() *Session {
	for s.parentRun != nil {
		s = s.parentRun
	}
	return s
}

// parentCall is what DecideRequest.Parent says for this agent run.
func (s *Session) parentCall() *ParentCall {
	if s.parent == nil {
		return nil
	}
	return &ParentCall{ID: s.parent.id, Name: s.parent.name, Attempt: s.parent.attempt, Depth: s.depth}
}

// children are the sub-agents running for s's calls, in dispatch order.
func (s *Session) children() []*Session {
	var out []*Session
	for _, c := range s.live {
		if c.child != nil {
			out = append(out, c.child)
		}
	}
	return out
}

// allOpenCalls are the open calls of the session and of its sub-agents.
func (s *Session) allOpenCalls() []*call {
	out := s.openCalls()
	for _, ch := range s.children() {
		out = append(out, ch.allOpenCalls()...)
	}
	return out
}

// drainAll drains the sub-agents, deepest first, then s: a sub-agent that
// finishes settles its call in its parent's run, which is drained after.
func (s *Session) drainAll() {
	for _, ch := range s.children() {
		ch.drainAll()
	}
	s.drain()
}

// delegate carries out a tool.delegate: the call's current attempt runs as
// a sub-agent. A stale attempt is ignored, as a late answer is.
func (s *Session) delegate(a ToolDelegate, def answerDefaults) error {
	c, attempt, err := s.target(a.ID, a.Attempt, def, "tool.delegate")
	if err != nil {
		return err
	}
	id := c.id
	if c.handler != HandlerWorker {
		return fmt.Errorf("tool.delegate: %q runs in the browser; only a worker's call may be delegated", id)
	}
	run := c.run
	if c.settled || attempt != c.attempt || c.backingOff {
		run.logger.Debug("ignored tool.delegate for an ended attempt", "call", id, "attempt", attempt)
		return nil
	}
	if c.child != nil {
		return fmt.Errorf("tool.delegate: %q attempt %d runs a sub-agent already", id, attempt)
	}
	fail := func(why string) {
		run.logger.Info("tool call not delegated", "call", id, "tool", c.name, "why", why)
		run.settle(c, outcome{code: CodeSubagentFailed, err: fmt.Sprintf("%s could not start its sub-agent: %s.", c.name, why)}, "")
	}
	depth := run.depth + 1
	if max := s.e.opts.MaxDepth; max > 0 && depth > max {
		fail(fmt.Sprintf("it would run at depth %d, and sub-agents may nest %d deep", depth, max))
		return nil
	}
	if max := s.e.opts.MaxFanOut; max > 0 && len(run.children()) >= max {
		fail(fmt.Sprintf("its agent has %s running, the most it may", plural(max, "sub-agent")))
		return nil
	}
	ch, err := run.newChild(c, a.Agent)
	if err != nil {
		run.report(WireBadConfig, fmt.Errorf("tool.delegate %q: %w", id, err))
		fail(fmt.Sprintf("its agent config cannot be used: %v", err))
		return nil
	}
	c.child = ch
	names := make([]string, 0, len(a.Agent.Tools))
	for _, t := range a.Agent.Tools {
		names = append(names, t.Name)
	}
	run.publish(EventToolDelegated, ToolDelegatedEvent{ID: c.id, Name: c.name, Attempt: c.attempt,
		Model: a.Agent.Model, Tools: names, Depth: depth})
	run.logger.Info("tool call delegated to a sub-agent", "call", id, "tool", c.name, "attempt", attempt, "model", a.Agent.Model, "depth", depth)
	msg := a.Message
	if msg == "" {
		msg = c.args
	}
	ch.addWaiting(waitingMessage{msg: Message{Role: model.RoleUser, Content: msg}})
	ch.drain()
	return nil
}

// newChild makes the sub-agent run that answers c's current attempt.
func (s *Session) newChild(c *call, agent AgentConfig) (*Session, error) {
	root := s.top()
	ctx, stop := context.WithCancelCause(s.ctx)
	logger := lazylog.With(root.baseLogger, "parent", c.id, "depth", s.depth+1)
	ch := &Session{
		id: root.id, owner: root.owner, e: root.e, log: root.log,
		logger: logger, baseLogger: logger,
		mail: root.mail, stopped: root.stopped, ctx: ctx, stop: stop, wg: root.wg,
		calls: root.calls, settled: root.settled, parent: c, parentRun: s, depth: s.depth + 1,
		userTurnCtx: c.attemptCtx, // the child's spans belong to the attempt it answers
		created:     s.e.opts.Clock.Now(),
	}
	if err := ch.takeAgent(agent); err != nil {
		stop(ErrSessionClosed)
		return nil, err
	}
	return ch, nil
}

// childDone ends a sub-agent that has nothing more to do, and settles the
// call it answers: with its final assistant message, or with
// subagent_failed.
func (s *Session) childDone() {
	c, run := s.parent, s.parentRun
	if c.child != s {
		return // its attempt ended already
	}
	c.child = nil
	s.stopChild("the sub-agent finished")
	why := s.failed
	var answer string
	if n := len(s.transcript); why == "" && n > 0 && s.transcript[n-1].Role == model.RoleAssistant {
		answer = s.transcript[n-1].Content
	}
	if why == "" && answer == "" {
		why = "it stopped without an answer"
	}
	if why != "" {
		run.logger.Info("sub-agent failed", "call", c.id, "tool", c.name, "why", why)
		run.attemptFailed(c, outcome{code: CodeSubagentFailed, err: fmt.Sprintf("The sub-agent running %s failed: %s", c.name, why)}, "")
		return
	}
	c.answeredBy = c.attempt
	run.settle(c, run.checkResult(c, answer), "")
}

// stopChild ends a sub-agent at once: its model turn and worker attempts
// are cancelled, its open calls settle cancelled (their pages get
// tool.cancel), and nothing it posts afterwards runs.
func (s *Session) stopChild(why string) {
	if s.ending {
		return
	}
	if s.turn != nil {
		// The turn's end is never read: the sub-agent stops now. Its
		// pages are told its text ends here, as a session's cut turn
		// tells them; a retry's sub-agent streams under the same call.
		s.publish(EventModelFinished, ModelFinishedEvent{StopReason: model.StopCancelled})
	}
	s.cancelAll(why)
	s.ending = true
	if s.chatSpan != nil {
		s.chatSpan.End()
		s.chatSpan = nil
	}
	s.queue, s.waiting = nil, nil
	s.stop(ErrSessionClosed)
}

// parentID is the id of the call s answers; empty for the session's own
// agent.
func (s *Session) parentID() string {
	if s.parent == nil {
		return ""
	}
	return s.parent.id
}
