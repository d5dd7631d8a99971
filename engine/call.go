package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"go.opentelemetry.io/otel/trace"
)

// call is one tool call in flight, owned by the session goroutine.
type call struct {
	id, name   string
	args       string
	handler    Handler
	spec       retrySpec
	input      ToolInput
	proposed   *ToolError // ready-made error for bad input or an unknown tool
	output     *schema
	batch      *batch
	attempt    int
	deadline   time.Time
	timer      clock.Timer             // the attempt's timeout, or the backoff
	timeouts   int                     // the timeouts armed (armTimeout): the latest is the attempt's
	cancel     context.CancelCauseFunc // a worker attempt's context
	backingOff bool
	retryAt    time.Time // when the next attempt starts, while backing off
	settled    bool
	answeredBy int // the attempt whose answer last ended an attempt; 0: none
	finished   ToolFinished
	// ref: the state names the tool.finished event that holds the call's
	// long result or error instead of keeping it (state.go:
	// inlineFinished); nil while it keeps it.
	ref            *finishedRef
	specErr        error           // the call's retry policy does not parse
	seq            int             // dispatch order within the session
	holder         *Page           // the page that runs the current client attempt; nil: none now
	started        time.Time       // when the call started, for its duration
	delivered      time.Time       // when the current client attempt reached its page
	awaitedPage    bool            // loaded waiting for a page, which pages were told before
	holderGone     bool            // its page left as the process stopped: pages were not told it waits
	undeclared     bool            // the model named a tool the agent does not have
	attemptStarted time.Time       // the progress cap counts from it
	notTwice       bool            // its tool declares idempotent: false (nottwice.go)
	approving      bool            // it waits for the user's approval (approval.go)
	span           trace.Span      // execute_tool; nil after a load
	attemptSpan    trace.Span      // the current attempt's
	attemptCtx     context.Context // attemptSpan's
	avoid          *Page           // the page whose attempt timed out: the next goes elsewhere if it can
	run            *Session        // the agent run that made the call: the session, or a sub-agent
	child          *Session        // the sub-agent answering the current attempt; nil: none
	progress       *progressWindow // the current attempt's reports; nil: none yet
}

// toolLabel is the call's tool as a metric label: the model may name tools
// that do not exist, and a label must come from a bounded set.
func (c *call) toolLabel() string {
	if c.undeclared {
		return "(undeclared)"
	}
	return c.name
}

// running reports whether an attempt is in progress: started, not backing
// off, not settled.
func (c *call) running() bool { return c.attempt > 0 && !c.backingOff && !c.settled }

// batch is the calls dispatched by one decision: siblings that settle
// before the model sees any of their outcomes.
type batch struct {
	id        int
	calls     []*call
	cancelled bool
}

func (b *batch) allSettled() bool {
	for _, c := range b.calls {
		if !c.settled {
			return false
		}
	}
	return true
}

// outcome is how an attempt ended.
type outcome struct {
	ok        bool
	result    string
	err       string
	code      ErrorCode
	detail    json.RawMessage
	retryable bool
	timedOut  bool // the attempt's deadline passed: no answer came
}

// maxQuotedID is the most of a call id an error quotes: the rest is the
// page's, which sent it (docs/protocol.md: a reply quotes at most 64
// bytes of a refused value).
const maxQuotedID = 64

// openCalls returns the unsettled calls in the order they were dispatched,
// so a cancel settles them (and tells the browser) in a predictable order.
func (s *Session) openCalls() []*call {
	var out []*call
	for _, c := range s.live {
		if !c.settled {
			out = append(out, c)
		}
	}
	return out
}

// dropSettled takes b's calls out of s.live and s.calls once they have all
// settled, keeping of each what a late answer is told (lookup): a long
// session holds no call's arguments, result or schemas after it is done.
func (s *Session) dropSettled(b *batch) {
	if !b.allSettled() {
		return
	}
	s.live = slices.DeleteFunc(s.live, func(c *call) bool { return c.batch == b })
	for _, c := range b.calls {
		delete(s.calls, c.id)
		s.settled[c.id] = settledCall{handler: c.handler, attempt: c.attempt, answeredBy: c.answeredBy}
	}
}

// staleAttempt is the error of an answer or a report for attempt, which
// is not c's current one: c runs another, or backs off before its next,
// when none is current.
func staleAttempt(id string, attempt int, c *call) error {
	if attempt > c.attempt && c.approving {
		return fmt.Errorf("%w: %w: %q waits for the user's approval: its first attempt starts once approved", ErrStaleAttempt, errAttemptNotStarted, id)
	}
	if attempt > c.attempt && c.attempt == 0 {
		// Made by the decision that answers it: its attempts start once
		// the whole decision is applied.
		return fmt.Errorf("%w: %w: %q has not started its first attempt: the calls a decision makes start after all its actions, so answer one in a later decision (tool.started says it began)", ErrStaleAttempt, errAttemptNotStarted, id)
	}
	if attempt > c.attempt {
		return fmt.Errorf("%w: %w: %q attempt %d (current: %d)", ErrStaleAttempt, errAttemptNotStarted, id, attempt, c.attempt)
	}
	if c.backingOff {
		return fmt.Errorf("%w: %q attempt %d (attempt %d ended; attempt %d starts after its backoff)", ErrStaleAttempt, id, attempt, c.attempt, c.attempt+1)
	}
	return fmt.Errorf("%w: %q attempt %d (current: %d)", ErrStaleAttempt, id, attempt, c.attempt)
}

// errAttemptNotStarted: an answer for an attempt past the call's current,
// which no late answer can be (a page's is stale_attempt all the same).
var errAttemptNotStarted = errors.New("that attempt never started")

// settledCall is what a session keeps of a call that settled with all its
// siblings: what an answer, a progress report or an approval that comes
// after is told.
type settledCall struct {
	handler             Handler
	attempt, answeredBy int
}

// lookup finds a call by id: one whose batch has not all settled, or what
// is kept of one that has, as a settled call of its own, run by s (the
// error a late answer gets is the same whichever run it reaches), that
// nothing may change.
func (s *Session) lookup(id string) (*call, bool) {
	if c, ok := s.calls[id]; ok {
		return c, true
	}
	if t, ok := s.settled[id]; ok {
		return &call{id: id, handler: t.handler, attempt: t.attempt, answeredBy: t.answeredBy, settled: true, run: s}, true
	}
	return nil, false
}

// namelessToolUse reports whether id is a tool use without a name in the
// model's turn the transcript ends with: a call the model made (a server of
// its own gave no name), which settles unknown_tool as any name no tool
// has, where a worker's nameless tool.call is its mistake. Refused, it
// stayed open in the transcript, and the chat's turns waited on it.
func (s *Session) namelessToolUse(id string) bool {
	n := len(s.transcript)
	return id != "" && n > 0 && s.transcript[n-1].Role == model.RoleAssistant &&
		slices.ContainsFunc(s.transcript[n-1].ToolUses, func(u ToolUse) bool { return u.ID == id && u.Name == "" })
}

// known reports whether the session has made a call with id, settled or
// not.
func (s *Session) known(id string) bool {
	_, live := s.calls[id]
	_, done := s.settled[id]
	return live || done
}

// startCall dispatches a tool.call action.
func (s *Session) startCall(tc ToolCall, b *batch) error {
	if tc.Name == "" && !s.namelessToolUse(tc.ID) {
		return errors.New("tool.call has no name")
	}
	id := tc.ID
	if id == "" {
		id = "call_" + s.e.opts.NewID()
	}
	if s.known(id) {
		return fmt.Errorf("tool.call id %q is already in use", id)
	}
	handler := tc.Handler.orDefault()
	if handler != HandlerWorker && handler != HandlerClient {
		return fmt.Errorf("tool.call %q: handler %q is neither \"worker\" nor \"client\"", id, tc.Handler)
	}
	c := &call{id: id, name: tc.Name, handler: handler, batch: b, args: rawArguments(tc.Arguments), run: s}
	t := s.tools.find(tc.Name)
	declared := t != nil
	var schemas toolSchemas
	if declared {
		schemas = t.schemas
	}
	c.output = schemas.output
	c.input = classifyInput(c.args, schemas.input)
	timeout := s.e.opts.WorkerTimeout
	if handler == HandlerClient {
		timeout = s.e.opts.ClientTimeout
	}
	spec, specErr := tc.Retry.parse(timeout)
	c.spec = spec
	switch {
	case !declared && tc.Name == "":
		c.proposed = &ToolError{ID: id, Attempt: 1, Code: CodeUnknownTool,
			Error: fmt.Sprintf("The call names no tool. Use one of the declared tools: %s.", s.toolNames())}
	case !declared:
		c.proposed = &ToolError{ID: id, Attempt: 1, Code: CodeUnknownTool,
			Error: fmt.Sprintf("There is no tool named %q. Use one of the declared tools: %s.", tc.Name, s.toolNames())}
	case c.input.Status == InputInvalid:
		c.proposed = &ToolError{ID: id, Attempt: 1, Code: CodeInvalidInput,
			Error: fmt.Sprintf("The arguments for %s do not match its input schema: %s. Call it again with arguments that do.", tc.Name, c.input.Error)}
	case c.input.Status == InputMalformed:
		c.proposed = &ToolError{ID: id, Attempt: 1, Code: CodeMalformedInput,
			Error: fmt.Sprintf("The arguments for %s are not a JSON object: %s. Call it again with a JSON object.", tc.Name, c.input.Error)}
	}
	c.seq = s.nextCall
	s.nextCall++
	c.started, c.undeclared = s.e.opts.Clock.Now(), !declared
	if declared && t.decl.Idempotent != nil && !*t.decl.Idempotent {
		c.notTwice = true
	}
	s.e.opts.Metrics.CallStarted(c.toolLabel(), string(handler))
	s.startCallSpan(c)
	s.calls[id] = c
	s.live = append(s.live, c)
	s.open++
	s.idle = false
	b.calls = append(b.calls, c)
	c.specErr = specErr
	if s.logs(slog.LevelInfo) {
		s.logger.Info("tool call dispatched", "call", id, "tool", c.name, "handler", handler, "input", c.input.Status)
	}
	return nil
}

// launch starts the first attempt of every call of a batch. It runs once the
// whole batch is known, so a call that fails at once still waits for its
// siblings before the model sees any outcome.
func (s *Session) launch(b *batch) {
	for _, c := range b.calls {
		if c.settled {
			continue // cancelled by an earlier sibling's start
		}
		if c.specErr != nil {
			s.report(WireBadDecision, fmt.Errorf("%w: tool.call %q: %w", ErrBadDecision, c.id, c.specErr))
			s.settle(c, outcome{err: fmt.Sprintf("The call to %s could not start: %v.", c.name, c.specErr), code: CodeInternal}, "")
			continue
		}
		// A client call no page declared fails at once (startAttempt):
		// the user is not asked to approve it for nothing.
		if s.needsApproval(c) && (c.handler != HandlerClient || s.declared(c.name)) {
			s.askApproval(c)
			continue
		}
		s.startAttempt(c)
	}
}

// rawArguments is the raw argument string of a tool.call: a JSON string is
// the model's raw text, anything else is the arguments' own JSON.
func rawArguments(args json.RawMessage) string {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return "{}"
	}
	if trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err == nil {
			return s
		}
	}
	return string(trimmed)
}

func (s *Session) toolNames() string {
	if len(s.agent.Tools) == 0 {
		return "none are declared"
	}
	var b bytes.Buffer
	for i, t := range s.agent.Tools {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Name)
	}
	return b.String()
}

// startAttempt begins the call's next attempt on its handler.
func (s *Session) startAttempt(c *call) {
	c.backingOff = false
	c.attempt++
	s.startAttemptSpan(c)
	now := s.e.opts.Clock.Now()
	c.deadline = now.Add(c.spec.timeout)
	c.attemptStarted = now
	c.delivered = time.Time{}
	attempt := c.attempt
	s.armTimeout(c, c.spec.timeout)
	started := ToolStartedEvent{
		ID: c.id, Name: c.name, Arguments: c.args, Input: c.input, Handler: c.handler,
		Attempt: attempt, Attempts: c.spec.attempts, Deadline: FormatDeadline(c.deadline),
	}
	if c.handler == HandlerWorker {
		s.publish(EventToolStarted, started)
		s.executeOnWorker(c, c.proposedFor(attempt))
		return
	}
	c.holder, c.holderGone = s.holderFor(c.name, c.avoid), false
	c.avoid = nil
	if c.holder != nil {
		started.Page = c.holder.id
	}
	s.publish(EventToolStarted, started)
	switch {
	case c.holder != nil:
		s.deliverCall(c)
	case s.declared(c.name):
		s.logger.Info("client call waiting for a page", "call", c.id, "tool", c.name, "attempt", attempt)
	default:
		s.settle(c, outcome{code: CodeClientUnavailable,
			err: fmt.Sprintf("%s runs in the user's browser, and no open page of this chat provides it. Tell the user to open the chat page, or answer without this tool.", c.name)}, "")
	}
}

// proposedFor is the ready-made error for attempt, or nil.
func (c *call) proposedFor(attempt int) *ToolError {
	if c.proposed == nil {
		return nil
	}
	p := *c.proposed
	p.Attempt = attempt
	return &p
}

// target finds the call an answer or a delegation is for, and the attempt
// it means: the id and attempt it names, else those of the tool.execute it
// answers (def), else the call's current attempt.
func (s *Session) target(id string, attempt int, def answerDefaults, what string) (*call, int, error) {
	if id == "" {
		id = def.id
	}
	if attempt == 0 && id == def.id {
		attempt = def.attempt
	}
	c, ok := s.lookup(id)
	switch {
	case id == "":
		return nil, 0, fmt.Errorf("%w: %s names no call id", ErrUnknownCall, what)
	case !ok:
		return nil, 0, fmt.Errorf("%w: %s", ErrUnknownCall, clip.Quote(id, maxQuotedID))
	case attempt == 0:
		attempt = c.attempt
	}
	return c, attempt, nil
}

// answer takes a tool.result or tool.error for a call.
func (s *Session) answer(a Action, def answerDefaults, fromClient bool) error {
	var id string
	var attempt int
	switch a := a.(type) {
	case ToolResult:
		id, attempt = a.ID, a.Attempt
	case ToolError:
		id, attempt = a.ID, a.Attempt
		if a.Code != "" && !a.Code.Known() && fromClient {
			return badRequest("tool.error code %.64q is not a tool error code", a.Code)
		}
	default:
		return fmt.Errorf("%v is not a tool answer", a.ActionType())
	}
	c, attempt, err := s.target(id, attempt, def, "the answer")
	switch {
	case err != nil:
		return err
	case c.run != s:
		return c.run.answer(a, answerDefaults{id: c.id, attempt: attempt}, fromClient) // a sub-agent's call
	case fromClient && c.handler != HandlerClient:
		return fmt.Errorf("%w: %q runs on the worker, not in the browser", ErrUnknownCall, c.id)
	}
	id = c.id
	if c.settled {
		// A repeat of the answer that settled the call is a duplicate;
		// anything else is for an attempt that ended without one.
		if attempt == c.answeredBy {
			return fmt.Errorf("%w: %s", ErrSettled, clip.Quote(id, maxQuotedID))
		}
		return fmt.Errorf("%w: %q attempt %d (the call has settled)", ErrStaleAttempt, id, attempt)
	}
	if attempt != c.attempt || c.backingOff {
		return staleAttempt(id, attempt, c)
	}
	c.answeredBy = attempt
	if fromClient && !c.delivered.IsZero() {
		s.e.opts.Metrics.RoundTrip(s.e.opts.Clock.Now().Sub(c.delivered))
	}
	switch a := a.(type) {
	case ToolResult:
		s.settle(c, s.checkResult(c, resultText(a.Result)), "")
	case ToolError:
		code := a.Code
		if code == "" {
			code = CodeToolFailed
		}
		text := a.Error
		if text == "" {
			text = c.name + " failed without saying why."
		}
		s.attemptFailed(c, outcome{err: text, code: code, detail: a.Detail, retryable: a.Retryable}, "")
	}
	return nil
}

// checkResult turns a result that violates the output schema into a
// terminal error: the bad result must never reach the model.
func (s *Session) checkResult(c *call, result string) outcome {
	if problem := checkOutput(result, c.output); problem != "" {
		s.logger.Info("tool result violates output schema", "call", c.id, "tool", c.name, "problem", problem)
		return outcome{code: CodeInvalidOutput,
			err: fmt.Sprintf("%s returned a result that does not match its output schema (%s), so it was discarded.", c.name, problem)}
	}
	return outcome{ok: true, result: result}
}

func (s *Session) attemptTimedOut(id string, attempt, timeout int) {
	c, ok := s.calls[id]
	if !ok || c.settled || c.backingOff || c.attempt != attempt || timeout != c.timeouts {
		// Over, or a timer that fired as progress moved the deadline and
		// armed the attempt's next. The latest timer's firing is the
		// deadline, whatever the wall clock reads now: timers run on
		// elapsed time, and a deadline read back from the store has no
		// monotonic reading, so a wall clock stepped back (NTP) after a
		// restart made it look ahead, and the call waited for ever.
		return
	}
	// A worker that does not answer is the operator's to look at; a page
	// that does not, its user's (a closed laptop, a slow tool).
	level := slog.LevelInfo
	if c.handler == HandlerWorker {
		level = slog.LevelWarn
	}
	s.logger.Log(context.Background(), level, "tool attempt timed out", "call", id, "tool", c.name, "handler", c.handler, "attempt", attempt, "timeout", c.spec.timeout)
	if c.reached() && c.notTwice {
		s.settleUnknown(c, fmt.Sprintf("%s got the call and did not answer within %s", c.name, c.spec.timeout), CancelTimeout)
		return
	}
	c.avoid = c.holder
	text := fmt.Sprintf("%s timed out after %s (attempt %d of %d)", c.name, c.spec.timeout, attempt, c.spec.attempts)
	if ran := c.ranFor(); ran > c.spec.timeout {
		text = fmt.Sprintf("%s timed out after %s, its deadline moved by progress reports (attempt %d of %d)", c.name, ran, attempt, c.spec.attempts)
	}
	s.attemptFailed(c, outcome{code: CodeTimeout, retryable: true, timedOut: true, err: text}, CancelTimeout)
}

// ranFor is how long the current attempt ran to its deadline: its
// timeout, or more when progress reports moved the deadline.
func (c *call) ranFor() time.Duration {
	if c.attemptStarted.IsZero() {
		return c.spec.timeout
	}
	return c.deadline.Sub(c.attemptStarted).Round(time.Millisecond)
}

// attemptFailed ends the current attempt with a failure: retry after the
// backoff while attempts remain and the failure allows it, else settle.
func (s *Session) attemptFailed(c *call, o outcome, abort CancelReason) {
	if !o.retryable || c.attempt >= c.spec.attempts {
		if o.timedOut {
			moved := ""
			if ran := c.ranFor(); ran > c.spec.timeout {
				moved = fmt.Sprintf(" (the last ran %s: progress reports moved its deadline)", ran)
			}
			peer := c.handler.peer()
			if c.child != nil {
				peer = "sub-agent the worker delegated it to" // the worker answered: tool.delegate
			}
			o.err = fmt.Sprintf("%s timed out: %s of %s%s, no answer from the %s.", c.name,
				plural(c.spec.attempts, "attempt"), c.spec.timeout, moved, peer)
		} else if c.attempt > 1 {
			o.err = fmt.Sprintf("%s (after %s)", o.err, plural(c.attempt, "attempt"))
		}
		o.retryable = false
		s.settle(c, o, abort) // settle ends the attempt, once
		return
	}
	s.endAttempt(c, abort)
	wait := c.spec.backoffBefore(c.attempt+1, s.e.opts.Rand)
	c.backingOff = true
	c.retryAt = s.e.opts.Clock.Now().Add(wait)
	attempt := c.attempt
	s.armRetry(c, wait)
	s.logger.Info("tool attempt failed, retrying", "call", c.id, "tool", c.name, "attempt", attempt, "code", o.code, "backoff", wait)
	s.publish(EventToolRetrying, ToolRetryingEvent{ID: c.id, Name: c.name, Attempt: attempt, Attempts: c.spec.attempts,
		Error: o.err, Code: o.code, Backoff: wait.Round(time.Millisecond).String()})
}

func (h Handler) peer() string {
	if h == HandlerClient {
		return "browser"
	}
	return "worker"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// settledNote is a settled call's log line and metric, said once the step
// that settled it is stored (eventLog.note), maybe by another goroutine:
// it holds what it says.
type settledNote struct {
	s              *Session     // the call's own
	logger         *slog.Logger // s's at the settle, taken on its goroutine: say may run on another
	id, name, tool string
	handler        Handler
	attempt        int
	ok             bool
	code           ErrorCode
	took           time.Duration // -1: unknown
}

// say logs and counts the settled call.
func (n settledNote) say() {
	if n.logger.Enabled(context.Background(), slog.LevelInfo) {
		n.logger.Info("tool call settled", "call", n.id, "tool", n.name, "ok", n.ok, "code", n.code, "attempt", n.attempt)
	}
	code := ""
	if !n.ok {
		code = string(n.code)
	}
	n.s.e.opts.Metrics.CallSettled(n.tool, string(n.handler), code, n.attempt, n.took)
}

// endAttempt stops the current attempt's timer, context and delivery.
func (s *Session) endAttempt(c *call, abort CancelReason) {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.cancel != nil {
		var cause error // context.Canceled
		if abort == CancelTimeout {
			cause = ErrAttemptTimedOut
		}
		c.cancel(cause)
		c.cancel = nil
	}
	if c.child != nil {
		ch := c.child
		c.child = nil
		ch.stopChild(fmt.Sprintf("the call to %s it answers ended", c.name))
	}
	if c.holder != nil && abort != "" && c.running() {
		frame, err := EncodeFrame(FrameToolCancel, ToolCancelFrame{ID: c.id, Attempt: c.attempt, Reason: abort})
		if err == nil {
			s.log.deliver(c.holder, FrameToolCancel, frame)
		}
	}
	c.holder, c.holderGone = nil, false
	c.progress.stop()
	c.progress = nil
	c.endAttemptSpan(abort)
}

// settle ends the call, once, and proposes what follows: hold while
// siblings are in flight, else their outcomes in call order and a new
// model turn (none when the batch was cancelled).
func (s *Session) settle(c *call, o outcome, abort CancelReason) {
	if c.settled {
		return
	}
	s.endAttempt(c, abort)
	c.settled = true
	s.dropSettled(c.batch)
	s.open--
	c.finished = ToolFinished{ID: c.id, OK: o.ok, Name: c.name}
	if o.ok {
		c.finished.Result = o.result
	} else {
		c.finished.Error = o.err
	}
	c.endCallSpan(o)
	took := time.Duration(-1) // unknown: a call loaded from a journal that did not keep its start
	if !c.started.IsZero() {
		took = s.e.opts.Clock.Now().Sub(c.started)
	}
	ev := ToolFinishedEvent{ID: c.id, OK: o.ok, Name: c.name, Result: c.finished.Result, Error: c.finished.Error}
	if !o.ok {
		ev.Code = o.code
		if json.Valid(o.detail) { // a Go worker's hand-made detail may not be JSON; the event must not be lost
			ev.Detail = o.detail
		}
	}
	c.refer(s.publish(EventToolFinished, ev))
	s.log.note(settledNote{s: s, logger: s.logger, id: c.id, name: c.name, tool: c.toolLabel(), handler: c.handler, attempt: c.attempt, ok: o.ok, code: o.code, took: took})
	if s.ending {
		return
	}
	var proposed Decision
	if !c.batch.allSettled() {
		proposed.Actions = []Action{Hold{}}
	} else {
		for _, sib := range c.batch.calls {
			proposed.Actions = append(proposed.Actions, MessageAppend{Message: sib.toolMessage()})
		}
		if !c.batch.cancelled {
			proposed.Actions = append(proposed.Actions, ModelPrompt{})
		}
	}
	s.enqueue(c.finished, proposed)
}

// finishedRef is what the state keeps of a settled call whose result or
// error is long: the seq of its tool.finished event, which holds it, and
// its outcome without the text.
type finishedRef struct {
	seq  int64
	stub ToolFinished
}

// refer notes the seq of the call's tool.finished event, which holds its
// result or error: a long one, the state leaves to that event.
func (c *call) refer(seq int64) {
	if seq > 0 && len(c.finished.Result)+len(c.finished.Error) > inlineFinished {
		c.ref = &finishedRef{seq: seq, stub: c.finished}
		c.ref.stub.Result, c.ref.stub.Error = "", ""
	}
}

// toolMessage is the transcript entry for a settled call.
func (c *call) toolMessage() Message {
	m := Message{Role: model.RoleTool, ToolUseID: c.id, Name: c.name, Content: c.finished.Result}
	if !c.finished.OK {
		m.Content, m.IsError = c.finished.Error, true
	}
	return m
}
