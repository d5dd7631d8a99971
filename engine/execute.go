package engine

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"
)

// executeOnWorker sends tool.execute for the attempt, in its own goroutine:
// a slow tool must not hold up the session or its siblings. The attempt's
// context is cancelled when the attempt ends (its timeout on the engine's
// Clock, the call settling, the session ending), never by a timer of its own:
// a second, wall-clock timer would race the engine's and could report a
// timeout as a worker failure.
func (s *Session) executeOnWorker(c *call, proposed *ToolError) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	if c.attemptSpan != nil {
		ctx = trace.ContextWithSpan(ctx, c.attemptSpan) // the worker's request is this attempt's
	}
	ctx = &attemptCtx{Context: ctx, target: progressTarget{s: s, id: c.id, attempt: c.attempt}}
	c.cancel = cancel
	t := ToolExecute{ID: c.id, Name: c.name, Arguments: c.args, Input: c.input, Attempt: c.attempt, Deadline: FormatDeadline(c.deadline)}
	var prop Decision
	if proposed != nil {
		prop.Actions = []Action{*proposed}
	}
	def := answerDefaults{id: c.id, attempt: c.attempt}
	s.workersRunning++
	s.wg.Add(1)
	s.goAfterCommit(func() {
		defer s.wg.Done()
		defer cancel(nil)
		d, err := Decision{}, s.leaseGone()
		if err == nil {
			d, err = s.callWorker(ctx, t, prop)
		}
		_ = s.post(context.Background(), func() {
			s.workersRunning--
			if err != nil {
				if !s.attemptOpen(def) {
					// The attempt already ended (timeout, cancel): its
					// context was cancelled, so an error is expected.
					s.logger.Debug("ignored worker error for an ended attempt", "call", def.id, "attempt", def.attempt, "err", err)
					return
				}
				s.report(WireWorkerFailed, err)
				if c.notTwice {
					// The request went out: the tool may have done what
					// it does before it failed (a panic, a 500, a dropped
					// connection). Trying again could do it twice.
					s.settleUnknown(c, fmt.Sprintf("%s failed in the worker (%s)", t.Name, PublicText(err)), "")
					return
				}
				d = Decision{Actions: []Action{ToolError{ID: def.id, Attempt: def.attempt, Retryable: true, Code: CodeToolFailed,
					Error: fmt.Sprintf("%s failed in the worker: %s", t.Name, PublicText(err))}}}
			}
			// An agent sent with the answer replaces the session's, as
			// from any trigger (a login tool that unlocks more tools).
			s.decisionAgent(d)
			reported := s.reported
			s.apply(d, def)
			if err == nil && s.reported == reported {
				s.leftOpen(t, d, def)
			}
		})
	})
}

// leftOpen says, as a session error, that d, a worker's answer to the
// tool.execute t that raised no error of its own, left its attempt open:
// allowed (a later decision may answer it), but a worker that returned
// proposed ({}) for a tool it runs meant something else, and the chat
// waits for the deadline (5 minutes by default) with nothing on the page.
// An answer of hold leaves it open on purpose, and is not said.
func (s *Session) leftOpen(t ToolExecute, d Decision, def answerDefaults) {
	// After the actions: one that ended the session set s.ending.
	if !s.attemptOpen(def) || s.ending || answers(d, def.id) || slices.ContainsFunc(d.Actions, func(a Action) bool { _, ok := a.(Hold); return ok }) {
		return
	}
	until := "a later decision answers it"
	if t.Deadline != "" {
		until = fmt.Sprintf("its attempt's deadline, %s, unless a later decision answers it", t.Deadline)
	}
	s.report(WireBadDecision, fmt.Errorf("%w: the worker's answer to tool.execute for %s (call %q, attempt %d) neither answers nor delegates the call: it stays open until %s (answer hold to leave it open on purpose)",
		ErrBadDecision, t.Name, def.id, def.attempt, until))
}

// attemptOpen reports whether the attempt def names is still the call's
// running one: it did not settle, time out or back off meanwhile.
func (s *Session) attemptOpen(def answerDefaults) bool {
	c := s.calls[def.id]
	return c != nil && !c.settled && !c.backingOff && c.attempt == def.attempt
}

// decisionAgent takes the agent a worker's decision carries, if any: a bad
// one is an error event (bad_config), and the old agent stays.
func (s *Session) decisionAgent(d Decision) {
	if d.Agent == nil {
		return
	}
	if err := s.takeAgent(*d.Agent); err != nil {
		s.report(WireBadConfig, err)
	}
}

// answers reports whether d answers, fails or delegates call id (an
// action naming no call means the one its tool.execute is for).
func answers(d Decision, id string) bool {
	for _, a := range d.Actions {
		var named string
		switch a := a.(type) {
		case ToolResult:
			named = a.ID
		case ToolError:
			named = a.ID
		case ToolDelegate:
			named = a.ID
		default:
			continue
		}
		if named == "" || named == id {
			return true
		}
	}
	return false
}
