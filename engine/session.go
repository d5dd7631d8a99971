package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/lazylog"
	"go.opentelemetry.io/otel/trace"
)

// Session is one conversation. Its state is owned by one goroutine; the
// methods below send it messages and are safe for concurrent use.
type Session struct {
	id     string
	owner  string
	e      *Engine
	log    *eventLog
	logger *slog.Logger // baseLogger, with the trace of the user message being answered
	// baseLogger is the session's logger without a trace: the one to use
	// off the session goroutine.
	baseLogger  *slog.Logger
	userTurn    trace.Span      // invoke_agent of the user message being answered; nil: none
	userTurnCtx context.Context // userTurn's context
	chatSpan    trace.Span      // the running model turn's

	mail    *mailbox        // the inbox, and the goroutine that empties it while it has work
	stopped chan struct{}   // closed when the session left memory
	ctx     context.Context // ends when the session leaves memory, its cause why (leftErr)
	stop    context.CancelCauseFunc
	wg      *sync.WaitGroup        // model turns and worker attempts, the sub-agents' too
	endReq  atomic.Pointer[string] // End called from inside Decide: end once it returns
	// budgetUsed says why the session takes no more messages, its token
	// budget used up (noteBudget); nil while it takes them.
	budgetUsed atomic.Pointer[string]
	// waitingBytes is the content of the user messages waiting for the
	// running turn (waiting), which send bounds: they ride in every step's
	// state until they join the transcript, and a state must fit the
	// store's message.
	waitingBytes atomic.Int64

	// reading is the read of the journal under way for replays from the
	// store, which the pages that resume meanwhile share (page.go).
	readingMu sync.Mutex
	reading   *journalRead

	// Owned by the run goroutine.
	agent        AgentConfig
	tools        agentTools // agent.Tools by name, with their schemas
	model        model.Model
	transcript   []Message
	calls        map[string]*call       // the calls of batches not all settled
	settled      map[string]settledCall // what is kept of the others (call.go: lookup)
	live         []*call                // the same calls, in dispatch order
	open         int                    // calls not yet settled
	queue        []queued
	turn         context.CancelFunc // the running model turn, if any
	promptWanted bool
	usage        usage            // what the guards count (guards.go)
	turnStarted  time.Time        // when the running model turn started
	waiting      []waitingMessage // user messages that arrived mid-turn
	messageIDs   []string         // the ids of the last user messages taken (messageid.go)
	idle         bool
	ending       bool

	// The pages and the lease (page.go).
	pages     []*Page     // attached, in attach order
	departed  []toolSet   // the tools of the last pages to leave
	turnPage  *Page       // the page that sent the running turn's message
	activity  uint64      // ticks: pages' last activity
	idleTimer clock.Timer // unloads the session when no page returns

	// Kept in the journal's state (state.go), besides the above.
	created, updated time.Time
	title            string
	nextCall         int  // dispatch order of the next call
	batches          int  // ids of sibling batches
	agentDirty       bool // the agent changed since the last commit

	afterCommit    []afterStep // what the step started and the replies it owes, once it is stored
	stepping       bool        // a step runs: goAfterCommit holds what it starts
	summary        Summary     // the last summary the store took
	storeRetry     clock.Timer // retries a batch the store refused
	unloading      bool        // leave memory after this step; the journal keeps the session
	draining       bool        // unload once no worker attempt and no sub-agent runs (Engine.Close)
	workersRunning int         // worker attempts whose Decide has not returned
	ownership      Ownership   // the session's lease on a shared store; nil otherwise
	lost           atomic.Bool // the lease is lost: leave, store nothing more, start nothing (leaseGone)

	// A sub-agent (subagent.go); all zero for the session's own agent.
	parent    *call    // the call it answers
	parentRun *Session // the agent run that made that call
	depth     int      // 1 for a sub-agent of the session's own agent
	failed    string   // why its last turn failed, if it did
}

// waitingMessage is a user message waiting for the turn before it to end,
// and the page that sent it (nil: the Go API).
type waitingMessage struct {
	msg  Message
	page *Page
}

// queued is a trigger waiting for the worker, with its proposal.
type queued struct {
	trigger  Trigger
	proposed Decision
}

func newSession(e *Engine, id, owner string) *Session {
	ctx, stop := context.WithCancelCause(context.Background())
	logger := lazylog.With(e.opts.Logger, "session", id)
	s := &Session{
		id:         id,
		owner:      owner,
		e:          e,
		logger:     logger,
		baseLogger: logger,
		log:        &eventLog{session: id, store: e.opts.Store, logger: e.opts.Logger, pages: map[*Page]struct{}{}, onStore: e.storeResult, metrics: e.opts.Metrics, spawn: e.runners.Go, keep: e.opts.ReplayBytes},
		stopped:    make(chan struct{}),
		ctx:        ctx,
		stop:       stop,
		calls:      map[string]*call{},
		settled:    map[string]settledCall{},
		wg:         &sync.WaitGroup{},
	}
	s.mail = newMailbox(s.handle, e.runners.Go)
	return s
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Done closes when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.stopped }

// Owner is who opened the session (OpenOptions.Owner).
func (s *Session) Owner() string { return s.owner }

// LastSeq is the seq of the session's latest event.
func (s *Session) LastSeq() int64 { return s.log.lastSeq() }

// KeptFrom is the seq of the first event the session keeps in memory
// (Options.ReplayBytes): an Attach with After at KeptFrom()-1 or later
// reads nothing from the store.
func (s *Session) KeptFrom() int64 { return s.log.kept() }

// handle handles one message of the mailbox (mailbox.go), on whichever
// goroutine empties it: a step the journal stores whole. Once the session
// ended or unloaded it returns depart, the session's leaving, for the
// mailbox to run; the mailbox stays running, so no goroutine takes a
// message again.
func (s *Session) handle(f func()) (leave func()) {
	s.step(f)
	if s.ending || s.unloading || (s.draining && s.workersRunning == 0 && len(s.children()) == 0) {
		return s.depart
	}
	return nil
}

// depart takes the session out of memory (the journal keeps it). The
// engine counts the session (Engine.wg) from its open until depart ends.
func (s *Session) depart() {
	s.leave()
	// Model turns and worker attempts see the cancelled context; wait for
	// them so nothing outlives the session in memory.
	s.wg.Wait()
	close(s.stopped)
	s.e.wg.Done()
}

// step handles one message: what it publishes goes to the store in one
// batch with the state after it, then to the pages; then do's callers get
// their replies.
func (s *Session) step(f func()) {
	s.log.begin()
	s.stepping = true
	f()
	if reason := s.endReq.Load(); reason != nil {
		s.end(*reason)
	}
	s.drainAll()
	s.noteBudget()
	s.commit()
}

// noteBudget tells send, on a page's goroutine, whether the session's
// token budget is used up: a chat the model may answer no more takes no
// more messages, which would only grow its journal. The worker, which gets
// guard.tripped, may raise the budget; the next step notes that.
func (s *Session) noteBudget() {
	if l := s.limits(); s.budgetSpent(l) {
		why := s.budgetSaid(l) + ", and the model answers no more of its messages: start a new chat"
		s.budgetUsed.Store(&why)
	} else {
		s.usage.BudgetTripped = false // a raised budget trips anew once spent
		if s.budgetUsed.Load() != nil {
			s.budgetUsed.Store(nil)
		}
	}
}

// commit stores the step; see step.
func (s *Session) commit() {
	sc := stateScratches.Get().(*stateScratch)
	state, refs, err := s.snapshot(sc)
	if err != nil {
		s.logger.Error("failed to encode the session's state; the journal keeps the events only", "err", err)
	}
	changed, err := s.log.commit(state, s.agentDirty, refs)
	putStateScratch(sc)
	s.stepping = false
	fenced := errors.Is(err, ErrFenced)
	if fenced {
		// Another node runs the session now, and its journal does not
		// hold this step: what the step started returns without asking
		// the model or the worker (leaseGone).
		s.leaseLost()
	}
	for _, a := range s.afterCommit {
		if a.start != nil {
			s.e.runners.Go(a.start)
		}
	}
	if changed {
		s.agentDirty = false
	}
	for i, a := range s.afterCommit {
		if a.reply != nil {
			if fenced {
				a.err = fmt.Errorf("%w: another gateway node runs the session now, and what this asked was not stored", ErrUnloaded)
			}
			a.reply <- a.err
		}
		s.afterCommit[i] = afterStep{}
	}
	s.afterCommit = s.afterCommit[:0]
	if fenced {
		return
	}
	if err != nil {
		s.retryStore()
		return
	}
	if changed {
		s.summarize()
	}
	// Any session idle with no page leaves memory after Unload, one opened
	// and never attached to too (its opener refused the request after
	// opening it): a step commits only on a session's own goroutine, never
	// a sub-agent's.
	if !s.ending && !s.unloading && len(s.pages) == 0 && !s.busy() && s.idleTimer == nil && s.e.opts.Unload > 0 {
		s.armUnload()
	}
}

// goAfterCommit runs f, a model turn or a worker attempt, on a runner once
// the step that started it is committed: its frames are on their way to
// the pages first (a client call's round trip does not wait for a
// goroutine's start, nor share the CPU with it), and what it starts runs
// after the journal says it started, as a restart would run it again.
// Outside a step f starts at once. s.wg counts f from now.
func (s *Session) goAfterCommit(f func()) {
	root := s.top() // a sub-agent's steps are its session's
	if !root.stepping {
		s.e.runners.Go(f)
		return
	}
	root.afterCommit = append(root.afterCommit, afterStep{start: f})
}

// afterStep is what a step leaves for after its commit: work it started
// (start, on a runner: goAfterCommit), or a caller's reply (Session.do),
// given after every start so a caller that learns its step is stored finds
// that work under way. A fenced step's callers get ErrUnloaded instead.
type afterStep struct {
	start func()
	reply chan<- error
	err   error
}

// retryStore tries the waiting batches again in a second, until the store
// takes them.
func (s *Session) retryStore() {
	if s.storeRetry != nil {
		return
	}
	s.storeRetry = s.e.opts.Clock.AfterFunc(time.Second, func() {
		_ = s.post(context.Background(), func() { s.storeRetry = nil })
	})
}

// summarize gives the store the session's summary when it changed.
func (s *Session) summarize() {
	sum := Summary{ID: s.id, Owner: s.owner, Title: s.title, Created: s.created, Updated: s.updated, Ended: s.ending, Busy: s.busy()}
	if sum == s.summary {
		return
	}
	if err := s.e.opts.Store.Summarize(context.Background(), sum); err != nil {
		s.logger.Warn("failed to store the session's summary", "err", err)
		return
	}
	s.summary = sum
}

// busy reports work in flight: a model turn, an open call, a trigger or a
// message waiting, or steps the store has not taken yet (unloading would
// lose them).
func (s *Session) busy() bool {
	return s.turn != nil || s.open > 0 || len(s.queue) > 0 || len(s.waiting) > 0 || s.promptWanted || s.log.failing() != nil
}

// leave ends the goroutine after the session ended or unloaded: pages are
// told, timers stopped, and the engine forgets the session (the journal
// keeps it).
func (s *Session) leave() {
	why := ErrUnloaded
	if s.ending {
		why = ErrSessionClosed
	}
	s.log.close(why)
	// A model's last deltas may be on their way to the store: the lease
	// goes back after them.
	s.log.settle()
	if s.ownership != nil && !s.lost.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.ownership.Release(ctx); err != nil {
			s.logger.Warn("failed to give the session's lease back; it expires by itself", "err", err)
		}
		cancel()
	}
	for _, t := range []clock.Timer{s.idleTimer, s.storeRetry} {
		if t != nil {
			t.Stop()
		}
	}
	for _, c := range s.calls {
		if c.timer != nil {
			c.timer.Stop()
		}
	}
	for _, c := range s.calls {
		c.endAttemptSpan("unloaded")
		c.endCallSpan(outcome{code: "unloaded", err: "the session left this process"})
	}
	if s.chatSpan != nil {
		s.chatSpan.End()
	}
	s.endUserTurn()
	s.e.forget(s)
	s.stop(why)
}

// logs reports whether the session's logger writes records of level. The
// records every call makes check first: their arguments cost allocations
// even when the handler drops the record.
func (s *Session) logs(level slog.Level) bool {
	return s.logger.Enabled(context.Background(), level)
}

// post hands f to the session goroutine. It fails once the session ended.
func (s *Session) post(ctx context.Context, f func()) error {
	if err := s.accepting(); err != nil {
		return err
	}
	return s.mail.put(ctx, s.ctx, s.guard(f))
}

// postHere is post for a caller that waits for f's reply: an idle session
// runs f on the caller's goroutine (mailbox.putHere).
func (s *Session) postHere(ctx context.Context, f func()) error {
	if err := s.accepting(); err != nil {
		return err
	}
	return s.mail.putHere(ctx, s.ctx, s.guard(f))
}

// accepting refuses input after the end, rather than leave it in an inbox
// nobody empties.
func (s *Session) accepting() error {
	if s.ctx.Err() != nil {
		return leftErr(s.ctx)
	}
	return nil
}

// leftErr is why a session's context ended: ErrUnloaded when the session
// left memory (it runs again from its journal, on this node or another),
// else ErrSessionClosed (it ended). A page that asks an unloaded session
// for anything asks again, of the session loaded anew; one told it ended
// does not.
func leftErr(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), ErrUnloaded) {
		return ErrUnloaded
	}
	return ErrSessionClosed
}

// guard drops a sub-agent's message that waited in the inbox past the
// sub-agent's end.
func (s *Session) guard(f func()) func() {
	if s.parent == nil {
		return f
	}
	return func() {
		if s.ctx.Err() == nil {
			f()
		}
	}
}

// do runs f as a step of the session (on the caller's goroutine when the
// session is idle: postHere) and waits for its error, which comes once
// f's step is committed: stored, or refused by the store (its batch waits
// and is retried); a fenced step's caller gets ErrUnloaded.
func (s *Session) do(ctx context.Context, f func() error) error {
	reply := make(chan error, 1)
	if err := s.postHere(ctx, func() {
		err := f() // first: f may start work, which goes on the same list
		// The root's commit sends the reply: a sub-agent's steps are its
		// session's (ReportProgress from a sub-agent's attempt asks here).
		root := s.top()
		root.afterCommit = append(root.afterCommit, afterStep{reply: reply, err: err})
	}); err != nil {
		return err
	}
	select {
	case err := <-reply:
		return err
	case <-s.stopped:
		// f may have ended the session itself and replied just before.
		select {
		case err := <-reply:
			return err
		default:
			return ErrSessionClosed
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start runs session.start and takes the agent config.
func (s *Session) start(ctx context.Context) error {
	return s.do(ctx, func() error {
		d, err := s.decide(SessionStart{Session: s.id}, Decision{})
		if err != nil {
			return err
		}
		if d.Agent == nil {
			return fmt.Errorf("%w: the worker answered session.start without an agent", ErrBadConfig)
		}
		if err := s.setAgent(*d.Agent); err != nil {
			return err
		}
		s.logger.Info("session opened", "model", s.agent.Model)
		s.apply(d, answerDefaults{})
		return nil
	})
}

// tool is the agent's tool named name; the zero AgentTool if it declares
// none.
func (s *Session) tool(name string) AgentTool {
	if t := s.tools.find(name); t != nil {
		return *t.decl
	}
	return AgentTool{}
}

// setAgent checks and takes an agent config.
func (s *Session) setAgent(a AgentConfig) error {
	if a.Model == "" {
		return fmt.Errorf("%w: no model", ErrBadConfig)
	}
	if err := a.Limits.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	for i, t := range a.Tools {
		if t.Approval != "" && t.Approval != ApprovalAlways {
			return fmt.Errorf("%w: tools[%d] %q: approval %q: want \"always\" or none", ErrBadConfig, i, t.Name, t.Approval)
		}
	}
	tools, err := compileTools(a.Tools, &s.e.schemas)
	if err != nil {
		return err
	}
	m, err := s.e.opts.Models.Resolve(a.Model)
	if err != nil {
		return fmt.Errorf("%w: model %q: %w", ErrBadConfig, a.Model, err)
	}
	s.agent, s.tools, s.model = a, tools, m
	s.agentDirty = true
	return nil
}

// Send hands the session a user message that no page sent: the turn's
// client calls go to the most recently active page (Page.Send says which
// page sent it).
func (s *Session) Send(ctx context.Context, content string) error {
	return s.send(ctx, nil, Message{Content: content})
}

func (s *Session) send(ctx context.Context, from *Page, msg Message) error {
	if err := s.refusal(msg); err != nil {
		// A copy of a message the session took (its page lost the socket
		// before message.taken) is confirmed, not refused: a refusal says
		// it was not taken, whatever the limits, the store or the budget
		// say of a new one now.
		took := false
		if msg.ID != "" {
			if err := s.do(ctx, func() error { took = s.takenAgain(from, msg.ID); return nil }); err != nil {
				return err
			}
		}
		if !took {
			return err
		}
		return nil
	}
	msg.Role = model.RoleUser
	return s.post(ctx, func() {
		if s.takenAgain(from, msg.ID) {
			return
		}
		if msg.ID != "" {
			s.rememberMessage(msg.ID)
			defer s.confirmMessage(from, msg.ID) // after the step is stored, with it
		}
		if from != nil {
			s.touch(from)
		}
		// The page waits for session.idle after each message, even one the
		// worker answers with nothing to do.
		s.idle = false
		s.addWaiting(waitingMessage{msg: msg, page: from})
	})
}

// refusal says why the session takes no new message msg now: its length,
// the store failing, the messages already waiting, the token budget.
func (s *Session) refusal(msg Message) error {
	if err := s.e.CheckMessage(msg.Content); err != nil {
		return err
	}
	if err := s.log.failing(); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	if waiting := s.waitingBytes.Load(); waiting > 0 && waiting+int64(len(msg.Content)) > int64(s.e.opts.MaxMessageBytes) {
		return fmt.Errorf("%w: the messages waiting for the running turn to end hold %d bytes, and with this one would pass %d (the longest message): send it once the turn ends", ErrLimitExceeded, waiting, s.e.opts.MaxMessageBytes)
	}
	if why := s.budgetUsed.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrLimitExceeded, *why)
	}
	return nil
}

// addWaiting puts w after the messages waiting for the running turn, and
// counts its bytes (waitingBytes, which send reads).
func (s *Session) addWaiting(w waitingMessage) {
	s.waiting = append(s.waiting, w)
	s.waitingBytes.Add(int64(len(w.msg.Content)))
}

// Answer settles a client attempt with a ToolResult or ToolError, whose ID
// and Attempt must be set. It returns an error wrapping ErrUnknownCall,
// ErrSettled or ErrStaleAttempt when the answer cannot count, and
// ErrBadRequest for a ToolError whose Code is not one of ToolErrors; the
// call is unaffected then.
func (s *Session) Answer(ctx context.Context, a Action) error {
	return s.do(ctx, func() error { return s.answer(a, answerDefaults{}, true) })
}

// Cancel stops the running model turn and every open call (code
// cancelled). Their outcomes join the transcript; the model is not
// re-prompted.
func (s *Session) Cancel(ctx context.Context) error {
	return s.do(ctx, func() error {
		s.cancelAll("cancelled by the user")
		return nil
	})
}

// End closes the session: open calls are cancelled, the worker gets
// session.end, pages are told, and the goroutine stops; End waits for it,
// or for ctx. Called from inside the worker's Decide with the context Decide
// got (or one derived from it), End only asks: the session ends as soon as
// that Decide returns. The session leaves memory only once its model turns
// and worker attempts have returned: one that ends its own session with
// another context must give it a deadline, or End waits for it to return.
func (s *Session) End(ctx context.Context, reason string) {
	if ctx.Value(decidingKey{}) == s {
		s.endReq.CompareAndSwap(nil, &reason)
		// Wake the goroutine in case Decide's context outlived the call.
		_ = s.post(context.WithoutCancel(ctx), func() {})
		return
	}
	err := s.do(ctx, func() error {
		s.end(reason)
		return nil
	})
	if err == nil {
		// The goroutine stops once the model turn and worker attempts,
		// all cancelled, have returned; do not outwait ctx for a worker
		// that ignores its context.
		select {
		case <-s.stopped:
		case <-ctx.Done():
		}
	}
}

// CallInput is call id's raw arguments and input, as its last tool.started
// or tool.approval gave them, from the events the session keeps in memory
// (ReplayBytes); false when they are not among them. For a front end that
// shows the outcome of a call whose start its stream did not carry.
func (s *Session) CallInput(id string) (args string, in ToolInput, ok bool) {
	var e struct {
		ID        string    `json:"id"`
		Arguments string    `json:"arguments"`
		Input     ToolInput `json:"input"`
	}
	// The text may match inside another call's input value: decoded, the
	// frame says whose it is.
	if !s.log.startOf(id, func(ev Event) bool { return json.Unmarshal(ev.Frame, &e) == nil && e.ID == id }) {
		return "", ToolInput{}, false
	}
	return e.Arguments, e.Input, true
}

// Transcript returns a copy of the session's transcript.
func (s *Session) Transcript(ctx context.Context) ([]Message, error) {
	var out []Message
	err := s.do(ctx, func() error {
		out = append([]Message(nil), s.transcript...)
		return nil
	})
	return out, err
}

// enqueue adds a trigger for the worker; drain hands it over.
func (s *Session) enqueue(t Trigger, proposed Decision) {
	s.queue = append(s.queue, queued{trigger: t, proposed: proposed})
}

// drain hands queued triggers to the worker, in order, then starts a wanted
// model turn and reports idleness.
func (s *Session) drain() {
	for !s.ending {
		s.decideQueued()
		if s.ending {
			return
		}
		if s.promptWanted && s.turn == nil && s.open == 0 {
			s.promptWanted = false
			if g := s.turnGuard(); g != nil {
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
		s.waitingBytes.Add(-int64(len(w.msg.Content)))
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
	for len(s.queue) > 0 && !s.ending {
		if reason := s.endReq.Load(); reason != nil {
			s.end(*reason)
			return
		}
		q := s.queue[0]
		s.queue = s.queue[1:]
		if g, ok := q.trigger.(GuardTripped); ok {
			s.publish(EventGuardTripped, GuardTrippedEvent(g))
		}
		d, err := s.decide(q.trigger, q.proposed)
		if err != nil {
			s.report(WireWorkerFailed, err)
			s.failed = "the worker failed: " + err.Error()
			// Keep the transcript whole: what happened (the user's words,
			// the model's text, the tools' outcomes) is recorded; nothing new
			// is started on a decision nobody made.
			s.apply(transcriptOnly(q.proposed), answerDefaults{})
			continue
		}
		if d.Agent != nil {
			if err := s.setAgent(*d.Agent); err != nil {
				s.report(WireBadConfig, err)
			}
		}
		s.apply(d, answerDefaults{})
		if _, ok := q.trigger.(GuardTripped); ok && s.promptWanted {
			s.usage.Granted = true // the worker asked for one more turn
		}
	}
}

// decide asks the worker, bounded by DecideTimeout; a panic is an error.
func (s *Session) decide(t Trigger, proposed Decision) (Decision, error) {
	dc := &decideCtx{parent: s.ctx, deadline: time.Now().Add(s.e.opts.DecideTimeout), deciding: s.top()}
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

// callWorker runs the worker's Decide with ctx, a decideCtx or an
// attemptCtx (both say which session decides); a panic is an error.
func (s *Session) callWorker(ctx context.Context, t Trigger, proposed Decision) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.baseLogger.Error("worker panicked", "trigger", t.TriggerType(), "panic", p, "stack", string(debug.Stack()))
			d, err = Decision{}, fmt.Errorf("%w: panic on %s: %v", ErrWorker, t.TriggerType(), p)
		}
	}()
	d, err = s.e.opts.Worker.Decide(ctx, DecideRequest{Session: s.id, Trigger: t, Proposed: proposed, Parent: s.parentCall()})
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
	s.logger.Warn("session error", "code", code, "err", err)
	s.publish(EventError, ErrorEvent{Code: code, Message: err.Error()})
}

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
	m := s.model
	s.wg.Add(1)
	s.goAfterCommit(func() {
		resp, err := model.Response{}, s.leaseGone()
		if err == nil {
			resp, err = generate(ctx, m, req, func(text string) {
				if s.parent != nil && ctx.Err() != nil {
					return // a sub-agent that ended says no more: a retry's sub-agent may be streaming under the same call
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
		_ = s.postHere(context.Background(), func() { s.turnDone(ctx, resp, err) })
	})
}

// generate calls the model, turning a panic into an error.
func generate(ctx context.Context, m model.Model, req model.Request, onDelta func(string)) (resp model.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("model panicked: %v", p)
		}
	}()
	return m.Generate(ctx, req, onDelta)
}

// turnDone takes a finished model turn and proposes what follows.
func (s *Session) turnDone(ctx context.Context, resp model.Response, err error) {
	s.turn = nil
	cancelled := ctx.Err() != nil
	ev := ModelFinishedEvent{StopReason: resp.StopReason, Usage: resp.Usage}
	msg := Message{Role: model.RoleAssistant, Content: resp.Text}
	switch {
	case cancelled:
		ev.StopReason = model.StopCancelled
	case err != nil:
		ev.StopReason = model.StopError
		ev.Error = err.Error()
	default:
		// Only a turn that finished cleanly may run tools: a half-streamed
		// tool call must never execute.
		msg.ToolUses = append([]ToolUse(nil), resp.ToolUses...)
		for i := range msg.ToolUses {
			if id := msg.ToolUses[i].ID; id == "" || s.known(id) {
				// Mint the id here, not in startCall: the transcript's tool
				// use and its tool message must name the same call. Each
				// agent's model numbers its calls from its own transcript,
				// the session's and every sub-agent's, and they share the
				// session's ids: one taken already (a sub-agent's call_2,
				// then the session's own) gets a new one.
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
		c.batch.cancelled = true
		s.settle(c, outcome{err: fmt.Sprintf("%s was cancelled: %s.", c.name, why), code: CodeCancelled}, CancelCancelled)
	}
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
	s.cancelAll("the session ended")
	s.queue = nil
	if _, err := s.decide(SessionEnd{Reason: reason}, Decision{}); err != nil {
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
