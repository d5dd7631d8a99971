package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/clienttools/gateway/engine/model"
)

// startTurn runs the model on the transcript in its own goroutine.
func (s *Session) startTurn() {
	s.countTurn()
	s.failed = ""
	s.turnStarted = s.e.opts.Clock.Now()
	ctx, cancel := context.WithCancel(s.ctx)
	ctx, s.chatSpan = s.startChatSpan(ctx)
	s.turn = cancel
	s.idle = false
	req := model.Request{
		Model:     s.agent.Model,
		System:    s.agent.System,
		MaxTokens: s.agent.MaxTokens,
		Stream:    s.agent.Stream,
		// The transcript only grows, and a full slice expression makes an
		// append by anyone else copy: no need to copy it every turn.
		Messages: s.transcript[:len(s.transcript):len(s.transcript)],
	}
	for _, t := range s.agent.Tools {
		req.Tools = append(req.Tools, model.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Input})
	}
	req.OnRetry = func(r model.Retry) {
		s.e.opts.Metrics.ModelRetry(r.Provider)
		if s.saysNoMore(ctx) {
			return
		}
		ev := ModelRetryingEvent{Attempt: r.Attempt, Attempts: r.Attempts, Backoff: r.Wait.Round(time.Millisecond).String()}
		if r.Err != nil {
			ev.Error = r.Err.Error() // as model.finished would say it
		}
		s.publish(EventModelRetrying, ev)
	}
	m := s.model
	s.wg.Add(1)
	s.goAfterCommit(func() {
		resp, err := model.Response{}, s.leaseGone()
		if err == nil {
			resp, err = generate(ctx, m, req, func(text string) {
				if s.saysNoMore(ctx) {
					return
				}
				s.publish(EventModelDelta, ModelDeltaEvent{Text: text})
			})
		}
		// The turn's step runs right here when the session is idle
		// (postHere): this goroutine is done anyway, and the step is
		// spared a hand-off. It stops counting first: the step may end
		// the session, which waits for s.wg. (A worker attempt's
		// goroutine posts its step instead: run on it,
		// BenchmarkWorkerToolCall took 33 µs a call instead of 28 on two
		// cores, while the model turn's made the gateway's calls cheaper.)
		s.wg.Done()
		_ = s.postHere(context.Background(), func() {
			s.turnDone(ctx, resp, err)
			// Once read: the turn's context leaves s.ctx's children,
			// where each turn stayed while the session was loaded.
			cancel()
		})
	})
}

// saysNoMore reports whether the turn of ctx may publish no more: a
// sub-agent that ended says nothing, while a retry's sub-agent may be
// streaming under the same call; nor does the turn of a session that
// ended, whose model.finished is published already. (A Stop's turn goes
// on publishing until its turnDone, which says what it streamed.)
func (s *Session) saysNoMore(ctx context.Context) bool {
	return ctx.Err() != nil && (s.parent != nil || s.cutShort.Load())
}

// generate calls the model, turning a panic into an error (modelPanic).
func generate(ctx context.Context, m model.Model, req model.Request, onDelta func(string)) (resp model.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &modelPanic{value: p, stack: debug.Stack()}
		}
	}()
	return m.Generate(ctx, req, onDelta)
}

// modelPanic is a model's panic. Its value stays in the log (turnDone):
// it may hold what no page or model should read (a request, a key).
type modelPanic struct {
	value any
	stack []byte
}

func (p *modelPanic) Error() string { return "the model panicked (the gateway's log has why)" }

// turnDone takes a finished model turn and proposes what follows.
func (s *Session) turnDone(ctx context.Context, resp model.Response, err error) {
	s.turn = nil
	cancelled := ctx.Err() != nil
	resp.Usage = resp.Usage.Bounded()
	ev := ModelFinishedEvent{StopReason: resp.StopReason, Usage: resp.Usage}
	msg := Message{Role: model.RoleAssistant, Content: resp.Text}
	switch {
	case cancelled:
		ev.StopReason = model.StopCancelled
	case err != nil:
		if p := (*modelPanic)(nil); errors.As(err, &p) {
			s.baseLogger.Error("model panicked", "panic", p.value, "stack", string(p.stack))
		}
		ev.StopReason = model.StopError
		ev.Error = err.Error()
	default:
		// Only a turn that finished cleanly may run tools: a half-streamed
		// tool call must never execute.
		msg.ToolUses = append([]ToolUse(nil), resp.ToolUses...)
		for i := range msg.ToolUses {
			if id := msg.ToolUses[i].ID; !model.WireID(id) || s.known(id) || slices.ContainsFunc(msg.ToolUses[:i], func(u ToolUse) bool { return u.ID == id }) {
				// Mint the id here, not in startCall: the transcript's tool
				// use and its tool message must name the same call. Each
				// agent's model numbers its calls from its own transcript,
				// the session's and every sub-agent's, and they share the
				// session's ids: one taken already (a sub-agent's call_2,
				// then the session's own) gets a new one. So does one the
				// providers refuse in a transcript (a model served by
				// another provider wrote "functions.get_weather:0", or one
				// past OpenAI's 40 bytes): every later turn would fail.
				msg.ToolUses[i].ID = "call_" + s.e.opts.NewID()
			}
		}
	}
	s.publish(EventModelFinished, ev)
	if s.chatSpan != nil {
		endChatSpan(s.chatSpan, ev, err)
		s.chatSpan = nil
	}
	if err != nil && !cancelled {
		s.report(WireModelFailed, err)
		s.failed = "its model failed: " + err.Error()
	}
	s.countTokens(resp.Usage)
	outcome := "ok"
	switch {
	case cancelled:
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	s.e.opts.Metrics.ModelTurn(s.agent.Model, outcome, resp.Usage.InputTokens, resp.Usage.OutputTokens, s.e.opts.Clock.Now().Sub(s.turnStarted))
	guard := s.repeatGuard(msg.ToolUses)
	var proposed Decision
	if msg.Content != "" || len(msg.ToolUses) > 0 {
		proposed.Actions = make([]Action, 0, 1+len(msg.ToolUses))
		proposed.Actions = append(proposed.Actions, MessageAppend{Message: msg})
	}
	for _, u := range msg.ToolUses {
		decl := s.tool(u.Name)
		args := AppendJSONString(nil, u.Arguments) // as json.Marshal writes it
		proposed.Actions = append(proposed.Actions, ToolCall{
			ID:        u.ID,
			Name:      u.Name,
			Arguments: args,
			Handler:   decl.Handler.orDefault(),
			Retry:     decl.Retry.clone(), // the worker may edit it; the declaration stays
		})
	}
	if guard != nil {
		// The calls do not run: the transcript keeps the turn's text only.
		proposed = transcriptOnly(proposed)
	}
	s.enqueue(ModelFinished{Message: msg, StopReason: ev.StopReason, Usage: resp.Usage, Error: ev.Error}, proposed)
	if guard != nil {
		s.trip(*guard)
	}
}

// cancelAll stops the model turn and settles every open call as cancelled.
func (s *Session) cancelAll(why string) {
	s.promptWanted = false
	if s.turn != nil {
		s.turn()
	}
	for _, c := range s.openCalls() {
		s.cancel(c, why)
	}
}

// cancel settles call c as cancelled, for why, and keeps its batch from
// prompting the model again.
func (s *Session) cancel(c *call, why string) {
	c.batch.cancelled = true
	text := fmt.Sprintf("%s was cancelled: %s.", c.name, why)
	if c.notTwice && c.running() && c.reached() {
		// Stopping it undoes nothing it did: the model must not take
		// "cancelled" for "did not happen", and pay twice.
		text = fmt.Sprintf("%s was cancelled (%s) while it ran, and it is declared idempotent: false: %s", c.name, why, mayHaveRun)
	}
	s.settle(c, outcome{err: text, code: CodeCancelled}, CancelCancelled)
}

// end closes the session from its own goroutine.
func (s *Session) end(reason string) {
	if s.ending {
		return
	}
	s.ending = true
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	turning := s.turn != nil
	s.cutShort.Store(true)
	s.cancelAll("the session ended")
	if turning {
		// The turn's end is never read: the session leaves first. Its
		// pages are told its text ends here, as a Stop tells them.
		s.publish(EventModelFinished, ModelFinishedEvent{StopReason: model.StopCancelled})
	}
	s.queue = nil
	if s.purging != nil {
		// Deleted: the worker is told once the journal is gone
		// (purgeStored), not before a purge that may fail.
	} else if _, err := s.decide(SessionEnd{Reason: reason}, Decision{}, false); err != nil {
		s.logger.Warn("worker failed on session.end", "err", err)
	}
	s.publish(EventSessionEnded, SessionEndedEvent{Reason: reason})
	// The step's commit stores session.ended, then run leaves.
	s.logger.Info("session ended", "reason", reason)
}

// transcriptOnly keeps a proposal's message.append actions, with tool uses
// dropped from assistant messages: calls that will not run must not be
// asked for in the transcript.
func transcriptOnly(d Decision) Decision {
	var out Decision
	for _, a := range d.Actions {
		m, ok := a.(MessageAppend)
		if !ok {
			continue
		}
		m.Message.ToolUses = nil
		if m.Message.Role == model.RoleAssistant && m.Message.Content == "" {
			continue
		}
		out.Actions = append(out.Actions, m)
	}
	return out
}
