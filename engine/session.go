package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// decidedSends are the messages Send took from inside a Decide of a
	// step (takeDecidedSends runs them once it returns).
	decidedMu    sync.Mutex
	decidedSends []func()
	// budgetUsed says why the session takes no more messages, its token
	// budget used up (noteBudget); nil while it takes them.
	budgetUsed atomic.Pointer[string]
	// cutShort: the session ended with its model turn running, whose end
	// is published already: the turn's goroutine publishes no more.
	cutShort atomic.Bool

	// reading is the read of the journal under way for replays from the
	// store, which the pages that resume meanwhile share (replayread.go).
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
	// purging: Delete asked that the session be deleted from the store
	// as it leaves (nil: not); closed once it has left memory, purged
	// saying how the deletion went (nil: deleted).
	purging chan struct{}
	purged  error

	// The pages and the lease (page.go).
	pages     []*Page     // attached, in attach order
	departed  []toolSet   // the tools of the last pages to leave
	turnPage  *Page       // the page that sent the running turn's message
	activity  uint64      // ticks: pages' last activity
	idleSince time.Time   // when idleTimer was armed: the session's last page and work ended
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
	// reported counts the problems report said, so that a check after a
	// decision's actions says nothing more of one they said already.
	reported int
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
	// announced: its event (guard.tripped) went out as the worker was
	// asked, and a step stored it: asked again after a reload, it is
	// not published twice.
	announced bool
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
		log:        &eventLog{session: id, epoch: e.opts.NewID(), store: e.opts.Store, logger: e.opts.Logger, pages: map[*Page]struct{}{}, onStore: e.storeResult, metrics: e.opts.Metrics, spawn: e.runners.Go, keep: e.opts.ReplayBytes},
		stopped:    make(chan struct{}),
		ctx:        ctx,
		stop:       stop,
		calls:      map[string]*call{},
		settled:    map[string]settledCall{},
		wg:         &sync.WaitGroup{},
	}
	s.mail = newMailbox(s.handle, e.runners.Go)
	// Not under the log's lock, where drop runs: the inbox may be full.
	s.log.left = func(p *Page) { e.runners.Go(p.tellLeft) }
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
	s.takeDecidedSends()
	if reason := s.endReq.Load(); reason != nil {
		s.end(*reason)
	}
	s.drainAll()
	s.noteBudget()
	s.commit()
}

// storeSoFar commits what the step has done so far, then goes on with it:
// run by a slow decision's timer (decideCtx), on the goroutine the timer
// lends while the session's waits for the worker's Decide, which touches
// none of the session's state.
func (s *Session) storeSoFar() {
	s.logger.Debug("the worker takes a while to decide: storing what the step did so far")
	s.commit()
	s.log.begin()
	s.stepping = true
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
		// Another node runs the session now, or this node's idea of it is
		// behind its journal (loaded from a replica behind its leader),
		// and the journal does not hold this step: what the step started
		// returns without asking the model or the worker (leaseGone), and
		// the session loads again from the journal when next asked.
		s.leaseLost("the session's step was fenced: another node runs it, or this node's copy is behind its journal; unloading", "err", err)
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
	if n, err := s.log.unstored(); n > 0 && !s.lost.Load() {
		// The pages saw none of them; the journal ends before them, and
		// the session's next load goes on from there.
		s.logger.Warn("the session leaves memory with steps the store refused: they are lost", "steps", n, "err", err)
	}
	if s.purging != nil {
		s.purgeStored()
	}
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
		c.progress.stop()
	}
	for _, c := range s.calls {
		c.leaveSpans()
	}
	if s.chatSpan != nil {
		s.chatSpan.End()
	}
	s.endUserTurn()
	s.e.forget(s)
	if s.purging != nil {
		close(s.purging) // Delete answers: gone from the store and from memory
	}
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
			// It ended, or left memory (another node runs it now): a
			// page's frame is then taken again there, not refused.
			return leftErr(s.ctx)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start runs session.start and takes the agent config.
func (s *Session) start(ctx context.Context) error {
	return s.do(ctx, func() error {
		d, err := s.decide(SessionStart{Session: s.id}, Decision{}, false)
		if err != nil {
			return err
		}
		if d.Agent == nil {
			return fmt.Errorf("%w: the worker answered session.start without an agent", ErrBadConfig)
		}
		if err := s.takeAgent(*d.Agent); err != nil {
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

// takeAgent is setAgent for an agent a worker sent (session.start, a
// decision, tool.delegate): its tools must be ones the model's providers
// take. A stored agent is loaded as it was taken (restore): one an earlier
// version took opens still.
func (s *Session) takeAgent(a AgentConfig) error {
	if err := checkForProviders(a); err != nil {
		return err
	}
	return s.setAgent(a)
}

// checkForProviders checks that a's tools are ones the model's providers
// take: Claude's and OpenAI's APIs refuse the others at the first turn,
// every turn, where the worker's config made the mistake at its start.
func checkForProviders(a AgentConfig) error {
	for _, t := range a.Tools {
		if t.Name != "" && !model.WireName(t.Name) {
			return fmt.Errorf("%w: tool name %.80q: a model's providers take 1 to 64 letters, digits, _ and - (Claude's and OpenAI's APIs refuse others at the first turn)", ErrBadConfig, t.Name)
		}
		if typ := inputType(t.Input); typ != "" {
			return fmt.Errorf("%w: tool %q: input schema: its type is %s, where a model's arguments are an object: no call could be valid, and a model's providers refuse the tool (leave type out, or make it \"object\")", ErrBadConfig, t.Name, typ)
		}
	}
	return nil
}

// setAgent checks and takes an agent config.
func (s *Session) setAgent(a AgentConfig) error {
	tools, err := checkAgent(a, &s.e.schemas)
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

// loadAgent takes the agent a stored session started with. A model this
// gateway does not serve now (its provider's key is gone, the model was
// renamed) does not keep the chat from opening: its history is the
// user's, and only its model turns fail, saying why, until the model is
// served again.
func (s *Session) loadAgent(a AgentConfig) error {
	tools, err := checkAgent(a, &s.e.schemas)
	if err != nil {
		return err
	}
	m, err := s.e.opts.Models.Resolve(a.Model)
	if err != nil {
		s.logger.Warn("the chat's model is not served by this gateway: the chat opens, and its model turns fail until it is", "model", a.Model, "err", err)
		m = unservedModel{id: a.Model, err: err}
	}
	s.agent, s.tools, s.model = a, tools, m
	return nil
}

// unservedModel stands for a stored chat's model that no provider serves.
type unservedModel struct {
	id  string
	err error
}

func (u unservedModel) Generate(context.Context, model.Request, func(string)) (model.Response, error) {
	return model.Response{}, fmt.Errorf("this chat's model %q is not served by this gateway now: %w", u.id, u.err)
}

// checkAgent checks an agent config, but for its model, which setAgent
// resolves, and compiles its tools.
func checkAgent(a AgentConfig, schemas *schemaCache) (agentTools, error) {
	if a.Model == "" {
		return nil, fmt.Errorf("%w: no model", ErrBadConfig)
	}
	if err := a.Limits.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	for i, t := range a.Tools {
		if t.Approval != "" && t.Approval != ApprovalAlways {
			return nil, fmt.Errorf("%w: tools[%d] %q: approval %q: want \"always\" or none", ErrBadConfig, i, t.Name, t.Approval)
		}
	}
	return compileTools(a.Tools, schemas)
}
