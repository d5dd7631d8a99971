package engine

import (
	"context"
	"encoding/json"
	"fmt"
)

// DecideRequest is what a worker is asked: the seed's {trigger, proposed},
// plus the session it concerns.
type DecideRequest struct {
	Session string `json:"session"`
	// Owner is who the session belongs to: the browser's id, or the
	// person the gateway's Options.Identify named. A tool that reads or
	// changes someone's data checks that it is Owner's.
	Owner    string   `json:"owner,omitempty"`
	Trigger  Trigger  `json:"trigger"`
	Proposed Decision `json:"proposed"`
	// Parent is set on a sub-agent's triggers: the call it answers
	// (docs/subagents.md). Nil for the session's own agent.
	Parent *ParentCall `json:"parent,omitempty"`
}

// UnmarshalJSON decodes the trigger by its "type".
func (r *DecideRequest) UnmarshalJSON(data []byte) error {
	var raw struct {
		Session  string          `json:"session"`
		Owner    string          `json:"owner"`
		Trigger  json.RawMessage `json:"trigger"`
		Proposed Decision        `json:"proposed"`
		Parent   *ParentCall     `json:"parent"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	t, err := DecodeTrigger(raw.Trigger)
	if err != nil {
		return err
	}
	r.Session, r.Owner, r.Trigger, r.Proposed, r.Parent = raw.Session, raw.Owner, t, raw.Proposed, raw.Parent
	return nil
}

// Worker decides what a session does next. Decide is called from the
// session's goroutine for every trigger but tool.execute, which runs
// concurrently (one goroutine per attempt, its context cancelled when the
// attempt ends; the trigger's Deadline says when that is at the latest), so
// an implementation must be safe for concurrent use. Returning req.Proposed
// gets the engine's default behaviour. Decide must not call the Session's
// blocking methods (Answer, Cancel; End and Send only ask, given Decide's
// context): it runs on the session's goroutine; return actions instead. A
// tool.execute's Decide, or a tool's own goroutine, that calls them gives
// them its attempt's context, which ends with the session. A Decide that
// waits on something (a network, a check) should watch its context: once
// such a decision of a queued trigger has taken 250 ms, the session stores
// what its step did so far, and its pages hear of it, before the decision
// is in.
type Worker interface {
	Decide(ctx context.Context, req DecideRequest) (Decision, error)
}

// WorkerFunc adapts a function to Worker.
type WorkerFunc func(ctx context.Context, req DecideRequest) (Decision, error)

// Decide calls f.
func (f WorkerFunc) Decide(ctx context.Context, req DecideRequest) (Decision, error) {
	return f(ctx, req)
}

// Tool is a tool written as a Go function, for in-process workers. Exec gets
// the call's validated arguments; a returned error becomes a terminal
// tool.error whose text reaches the model.
type Tool struct {
	Name        string
	Description string
	Input       json.RawMessage
	Output      json.RawMessage
	Retry       *RetryPolicy
	// Idempotent and Approval are AgentTool's.
	Idempotent *bool
	Approval   string
	Exec       func(ctx context.Context, args json.RawMessage) (any, error)
	// Agent, when set, answers each call with a sub-agent running this
	// config instead of Exec: a tool.delegate whose message is the call's
	// arguments (docs/subagents.md). Its tools that are Go functions are
	// run by the ToolWorker's Tools, like any other.
	Agent *AgentConfig
}

// Declare returns the AgentTool the model sees for t.
func (t Tool) Declare() AgentTool {
	return AgentTool{Name: t.Name, Description: t.Description, Input: t.Input, Output: t.Output, Retry: t.Retry,
		Idempotent: t.Idempotent, Approval: t.Approval}
}

// Schema is a JSON Schema written inline; it panics on text that is not JSON,
// which is a programming error caught by the first test run.
func Schema(text string) json.RawMessage {
	if !json.Valid([]byte(text)) {
		panic(fmt.Sprintf("engine.Schema: not JSON: %s", text))
	}
	return json.RawMessage(text)
}

// Run executes the tool for a tool.execute trigger and returns the action
// that settles it: a tool.result, or a tool.error carrying the error's text.
// Input that failed validation is not run: the engine's proposed error is
// returned instead. A tool with an Agent returns a tool.delegate.
func (t Tool) Run(ctx context.Context, req DecideRequest) Decision {
	exec, ok := req.Trigger.(ToolExecute)
	if !ok || exec.Input.Status != InputValid {
		return req.Proposed
	}
	if t.Agent != nil {
		return Decision{Actions: []Action{ToolDelegate{Agent: *t.Agent}}}
	}
	out, err := t.Exec(context.WithValue(ctx, requestKey{}, req), exec.Input.Value)
	if err != nil {
		return Decision{Actions: []Action{ToolError{Error: err.Error(), Code: CodeToolFailed}}}
	}
	result, err := Marshal(out)
	if err != nil {
		return Decision{Actions: []Action{ToolError{Error: fmt.Sprintf("%s returned a result that is not JSON: %v", t.Name, err), Code: CodeToolFailed}}}
	}
	return Decision{Actions: []Action{ToolResult{Result: result}}}
}

type requestKey struct{}

// RequestFromContext returns the request a Tool's Exec runs for, from its
// context: the session, its Owner (whose data the tool may touch), and
// the call (Trigger, a ToolExecute: its id and attempt).
func RequestFromContext(ctx context.Context) (DecideRequest, bool) {
	req, ok := ctx.Value(requestKey{}).(DecideRequest)
	return req, ok
}

// ToolWorker is a complete worker for an agent whose worker tools are Go
// functions: it answers session.start with Agent, runs Tools on tool.execute,
// and accepts every other proposal. Client tools are declared in Agent.Tools
// with HandlerClient. engine.New checks its agent as each session's start
// would (ErrBadConfig), and that each tool has an Exec or an Agent.
type ToolWorker struct {
	Agent AgentConfig
	Tools []Tool
}

// check checks the agent w declares at session.start, as each session's
// start would, and that each of Tools runs (an Exec, or an Agent, checked
// too).
func (w *ToolWorker) check(schemas *schemaCache) error {
	agents := []AgentConfig{w.declared()}
	for i, t := range w.Tools {
		switch {
		case t.Agent != nil:
			agents = append(agents, *t.Agent)
		case t.Exec == nil:
			return fmt.Errorf("%w: Tools[%d] %q has neither Exec nor Agent", ErrBadConfig, i, t.Name)
		}
	}
	for _, a := range agents {
		if err := checkForProviders(a); err != nil {
			return err
		}
		if _, err := checkAgent(a, schemas); err != nil {
			return err
		}
	}
	return nil
}

// declared is the agent w answers session.start with: Agent, with Tools
// declared after its own.
func (w *ToolWorker) declared() AgentConfig {
	agent := w.Agent
	agent.Tools = append([]AgentTool(nil), w.Agent.Tools...)
	for _, tool := range w.Tools {
		agent.Tools = append(agent.Tools, tool.Declare())
	}
	return agent
}

// Decide implements Worker.
func (w *ToolWorker) Decide(ctx context.Context, req DecideRequest) (Decision, error) {
	switch t := req.Trigger.(type) {
	case SessionStart:
		agent := w.declared()
		return Decision{Agent: &agent}, nil
	case ToolExecute:
		for _, tool := range w.Tools {
			if tool.Name == t.Name {
				return tool.Run(ctx, req), nil
			}
		}
	}
	return req.Proposed, nil
}
