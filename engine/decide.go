package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/clienttools/gateway/engine/model"
	"go.opentelemetry.io/otel/trace"
)

// enqueue adds a trigger for the worker; drain hands it over.
func (s *Session) enqueue(t Trigger, proposed Decision) {
	s.queue = append(s.queue, queued{trigger: t, proposed: proposed})
}

// drain hands queued triggers to the worker, in order, then starts a wanted
// model turn and reports idleness.
func (s *Session) drain() {
	for !s.ending && !s.top().lost.Load() {
		s.decideQueued()
		if s.ending {
			return
		}
		if s.promptWanted && s.turn == nil && s.open == 0 {
			s.promptWanted = false
			if g := s.turnGuard(); g != nil {
				if g.Guard == GuardSessionTokens && s.usage.BudgetTripped {
					// Tripped for the budget already: a message taken
					// before it was used up joins the transcript,
					// unanswered, and says so once (agent.md).
					continue
				}
				s.trip(*g)
				continue // the worker decides what follows
			}
			s.startTurn()
		}
		if l := s.limits(); s.parent == nil && s.turn == nil && s.open == 0 && !s.promptWanted && len(s.queue) == 0 &&
			s.budgetSpent(l) && !s.usage.BudgetTripped {
			// The reply that used the budget up trips its guard now, not
			// a message the session would refuse: the page learns it,
			// and the worker may raise the budget, the one way the
			// session takes messages again.
			s.trip(*s.budgetGuard(l))
			continue
		}
		// A user message waits for the turn before it to end: added
		// mid-turn, it would split a tool use from its result.
		if len(s.waiting) == 0 || s.turn != nil || s.open > 0 || s.promptWanted {
			break
		}
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.updated = s.e.opts.Clock.Now()
		if s.title == "" {
			s.title = titleOf(w.msg.Content)
		}
		s.newUserMessage()
		if s.parent == nil {
			s.startUserTurn()
		}
		s.turnPage = nil
		if w.page != nil && w.page.attached {
			s.turnPage = w.page
		}
		s.enqueue(UserMessage{Message: w.msg}, Decision{Actions: []Action{MessageAppend{Message: w.msg}, ModelPrompt{}}})
	}
	if s.ending {
		return
	}
	if !s.idle && s.turn == nil && s.open == 0 && len(s.queue) == 0 && len(s.waiting) == 0 {
		s.idle = true
		if s.parent != nil {
			s.childDone() // a sub-agent with nothing to do has answered
			return
		}
		s.publish(EventSessionIdle, struct{}{})
		s.endUserTurn()
	}
}

// decideQueued hands queued triggers to the worker, in order.
func (s *Session) decideQueued() {
	// A lost lease (a fenced store, this step's or an earlier one's) asks
	// the worker nothing more: the session leaves, and its next node
	// decides what its journal holds queued.
	for len(s.queue) > 0 && !s.ending && !s.top().lost.Load() {
		if reason := s.endReq.Load(); reason != nil {
			s.end(*reason)
			return
		}
		q := s.queue[0]
		if g, ok := q.trigger.(GuardTripped); ok && !q.announced {
			s.publish(EventGuardTripped, GuardTrippedEvent(g))
			s.queue[0].announced = true // a store meanwhile keeps it so
		}
		// Queued while the worker decides: a slow decision's step is
		// stored before the decision (storeSoFar), with the trigger to
		// decide again should the process die meanwhile. Not a
		// sub-agent's: its first decisions are asked in the middle of
		// its parent's decision (delegate), whose calls are not launched
		// yet, a state no step stores.
		d, err := s.decide(q.trigger, q.proposed, s.parent == nil)
		s.queue = s.queue[1:]
		if s.top().lost.Load() {
			s.top().dropDecidedSends()
			return
		}
		s.top().takeDecidedSends()
		if err != nil {
			s.report(WireWorkerFailed, err)
			s.failed = "the worker failed: " + PublicText(err)
			// Keep the transcript whole: what happened (the user's words,
			// the model's text, the tools' outcomes) is recorded; nothing new
			// is started on a decision nobody made.
			s.apply(transcriptOnly(q.proposed), answerDefaults{})
			continue
		}
		s.decisionAgent(d)
		s.apply(d, answerDefaults{})
		if _, ok := q.trigger.(GuardTripped); ok && s.promptWanted {
			s.usage.Granted = true // the worker asked for one more turn
		}
	}
}

// slowDecision is how long a queued trigger's decision may take before its
// step stores what it did so far (storeSoFar): the pages waiting on the
// step (a message's message.taken, a tool's answer's tool.finished) are
// answered while the worker decides, not after, well within the SDK's
// answerTimeout, and a page's reader waits on the session no longer.
const slowDecision = 250 * time.Millisecond

// decide asks the worker, bounded by DecideTimeout; a panic is an error.
// storing: the step stores what it did so far should the worker take
// slowDecision (a queued trigger's decision, which the stored state keeps
// queued until it is decided).
func (s *Session) decide(t Trigger, proposed Decision, storing bool) (Decision, error) {
	root := s.top()
	dc := &decideCtx{parent: s.ctx, deadline: time.Now().Add(s.e.opts.DecideTimeout), deciding: root, storing: storing && root.stepping}
	defer dc.end()
	// The worker's request belongs to the user message being answered.
	var ctx context.Context = dc
	if s.userTurnCtx != nil {
		ctx = trace.ContextWithSpan(dc, trace.SpanFromContext(s.userTurnCtx))
	}
	return s.callWorker(ctx, t, proposed)
}

// decidingKey marks the context the worker's Decide gets (decideCtx,
// attemptCtx answer it), so End called from inside it does not wait for the
// goroutine that waits for Decide.
type decidingKey struct{}

// inStepKey marks the context of a Decide that runs in the session's step,
// on its goroutine (decideCtx alone: a tool.execute's runs on the
// attempt's): what it asks of the session waits for the step to end.
type inStepKey struct{}

// callWorker runs the worker's Decide with ctx, a decideCtx or an
// attemptCtx (both say which session decides); a panic is an error.
func (s *Session) callWorker(ctx context.Context, t Trigger, proposed Decision) (Decision, error) {
	return decideSafely(ctx, s.e.opts.Worker, DecideRequest{Session: s.id, Owner: s.owner, Trigger: t, Proposed: proposed, Parent: s.parentCall()}, s.baseLogger)
}

// decideSafely runs w's Decide on req: a panic is an error (logged, with its
// stack), and an error is an ErrWorker.
func decideSafely(ctx context.Context, w Worker, req DecideRequest, logger *slog.Logger) (d Decision, err error) {
	t := req.Trigger
	defer func() {
		if p := recover(); p != nil {
			logger.Error("worker panicked", "trigger", t.TriggerType(), "panic", p, "stack", string(debug.Stack()))
			// The panic's value stays in the log: it may hold what no
			// page or model should read (a query, a credential).
			d, err = Decision{}, fmt.Errorf("%w: it panicked on %s (the gateway's log has why)", ErrWorker, t.TriggerType())
		}
	}()
	d, err = w.Decide(ctx, req)
	if err != nil && !errors.Is(err, ErrWorker) {
		err = fmt.Errorf("%w on %s: %w", ErrWorker, t.TriggerType(), err)
	}
	return d, err
}

// answerDefaults fill in a tool.result's or tool.error's id and attempt
// when the decision answered a tool.execute trigger.
type answerDefaults struct {
	id      string
	attempt int
}

// apply carries out a decision's actions in order. A bad action is
// reported and skipped; the rest still run.
func (s *Session) apply(d Decision, def answerDefaults) {
	var calls *batch // the calls of one decision are siblings
	for i, a := range d.Actions {
		var err error
		switch a := a.(type) {
		case ToolCall:
			if calls == nil {
				s.batches++
				calls = &batch{id: s.batches}
			}
			err = s.startCall(a, calls)
		case ToolResult, ToolError:
			err = s.answer(a, def, false)
			switch {
			case errors.Is(err, errAttemptNotStarted):
				// Not late: the worker's mistake, which it is told of as
				// of an unknown call (the call waits for its attempt's
				// answer, or its timeout).
			case errors.Is(err, ErrStaleAttempt) || errors.Is(err, ErrSettled):
				// A late answer is expected after a timeout, a repeat
				// (in this decision or another) after one that settled
				// the call; it never counts.
				s.logger.Debug("ignored tool answer", "err", err)
				err = nil
			}
		case MessageAppend:
			err = s.appendMessage(a.Message)
		case ModelPrompt:
			s.promptWanted = true
		case Hold:
		case ToolDelegate:
			err = s.delegate(a, def)
		case EndSession:
			if s.parent != nil {
				s.childDone() // a sub-agent ends with its answer so far
				return
			}
			s.end(a.Reason)
			return
		case ClientEvent:
			s.publish(EventClientEvent, ClientEventEvent(a))
		case nil:
			err = errors.New("action is null")
		default:
			err = fmt.Errorf("unknown action type %q", a.ActionType())
		}
		if err != nil {
			s.report(WireBadDecision, fmt.Errorf("%w: actions[%d]: %w", ErrBadDecision, i, err))
		}
	}
	if calls != nil {
		s.launch(calls)
	}
}

func (s *Session) appendMessage(m Message) error {
	switch m.Role {
	case model.RoleUser, model.RoleAssistant, model.RoleTool:
	default:
		return fmt.Errorf("message role %q is not user, assistant or tool", m.Role)
	}
	s.transcript = append(s.transcript, m)
	s.publish(EventMessage, MessageEvent{Message: m})
	return nil
}

// publish records a session event, a sub-agent's with the id of the call
// it answers. Publishing after the end is harmless.
func (s *Session) publish(typ string, payload any) (seq int64) {
	ev, err := s.log.publish(typ, s.parentID(), payload)
	if err != nil && !errors.Is(err, ErrSessionClosed) {
		s.logger.Error("failed to publish event", "type", typ, "err", err)
	}
	return ev.Seq
}

// report tells the browsers and the log about a session-level problem.
func (s *Session) report(code WireCode, err error) {
	s.reported++
	s.logger.Warn("session error", "code", code, "err", err)
	s.publish(EventError, ErrorEvent{Code: code, Message: PublicText(err)})
}
