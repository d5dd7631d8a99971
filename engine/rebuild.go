package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
)

// ErrUnloaded: the session left memory (idle, or the engine closed) while
// the call was made; Engine.Load brings it back.
var ErrUnloaded = errors.New("session unloaded")

// ErrCorrupt: a session's journal cannot be read back.
var ErrCorrupt = errors.New("session journal is unreadable")

// loadCall is one load of a session in progress; others wait for it.
type loadCall struct {
	done chan struct{}
	s    *Session
	err  error
	// deleting: Delete deletes the session from the store meanwhile;
	// those that waited look again once it is done.
	deleting bool
}

// Load returns the session with id, loading it from the store when it is
// not in memory: after an unload, or after the process restarted. A session
// that ended stays ended (ErrSessionClosed); one the store does not have is
// ErrNoSession.
func (e *Engine) Load(ctx context.Context, id string) (*Session, error) {
	if err := CheckID(id); err != nil {
		// No session has it, and a store must not be asked: a NATS
		// subject cannot take it (a wildcard, a dot), or one this long
		// closes the store's connection.
		return nil, fmt.Errorf("%w: %w", ErrNoSession, err)
	}
	e.mu.Lock()
	// A session being opened or loaded is remembered before it has
	// started: it is given out once it has.
	lc, loading := e.loading[id]
	if s, ok := e.sessions[id]; ok && !loading {
		e.mu.Unlock()
		return s, nil
	}
	if e.closed {
		e.mu.Unlock()
		return nil, ErrSessionClosed
	}
	if !loading {
		lc = &loadCall{done: make(chan struct{})}
		e.loading[id] = lc
	}
	e.mu.Unlock()
	if !loading {
		lc.s, lc.err = e.rebuild(ctx, id)
		e.loaded(id, lc)
	}
	select {
	case <-lc.done:
		if lc.deleting {
			return e.Load(ctx, id)
		}
		return lc.s, lc.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loaded ends the load (or open) of session id that lc stands for, its
// outcome set, and lets the callers that waited for it have it.
func (e *Engine) loaded(id string, lc *loadCall) {
	e.mu.Lock()
	delete(e.loading, id)
	e.mu.Unlock()
	close(lc.done)
}

// LoadFor is Load for a session of owner's. Another owner's is refused
// with ErrNoSession, the same answer as for a session the store does not
// have, so a caller cannot learn which; and when the load brought it into
// memory for nothing (no page attached, no work in flight), it leaves at
// once, not after Options.Unload (whatever Unload is: it keeps sessions
// their owners use): a client that names other browsers' sessions holds no
// memory with them.
//
// A session it brings into memory counts against Options.MaxLiveSessions
// as a new one does (LoadOwn).
func (e *Engine) LoadFor(ctx context.Context, id, owner string) (*Session, error) {
	if e.knownOwner(id, owner) {
		return nil, fmt.Errorf("%w: session %s is not this owner's", ErrNoSession, id)
	}
	s, err := e.LoadOwn(ctx, id, owner)
	if errors.Is(err, ErrCorrupt) {
		// Its owner is in the state that could not be read: the list of
		// chats says whose it is, so another browser learns nothing of it.
		switch listed, lerr := e.listedFor(ctx, id, owner); {
		case lerr != nil:
			return nil, fmt.Errorf("%w: the list of sessions: %w", ErrStoreUnavailable, lerr)
		case !listed:
			return nil, fmt.Errorf("%w: session %s is not this owner's", ErrNoSession, id)
		}
	}
	if err != nil || s.owner == owner {
		return s, err
	}
	_ = s.post(ctx, func() {
		if s.unloadIfIdle() {
			s.logger.Debug("session unloaded: loaded for another owner, who may not have it")
		}
	})
	e.rememberOwner(id, s.owner)
	return nil, fmt.Errorf("%w: session %s is not this owner's", ErrNoSession, id)
}

// maxKnownOwners bounds Engine.owners: past it, one it knew is forgotten.
const maxKnownOwners = 4096

// knownOwner reports whether session id, not in memory, is known to be
// another owner's than owner: a load found it so. A session's owner never
// changes, so naming another browser's long chat again and again costs a
// map lookup, not a read of its journal each time (an outside audit: 110
// ms of CPU and the journal in memory a refusal, for a 10 MB chat).
func (e *Engine) knownOwner(id, owner string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	known, ok := e.owners[id]
	return ok && known != owner && e.sessions[id] == nil
}

// rememberOwner notes that session id is owner's.
func (e *Engine) rememberOwner(id, owner string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.owners == nil {
		e.owners = map[string]string{}
	}
	if len(e.owners) >= maxKnownOwners {
		for forget := range e.owners {
			delete(e.owners, forget)
			break
		}
	}
	e.owners[id] = owner
}

// LoadOwn is Load for a caller that asks as owner and checks the
// session's owner itself: a session it brings into memory counts against
// owner's Options.MaxLiveSessions as a new one does. Before the load,
// another of owner's sessions that has had no page and no work for
// idleGrace leaves memory to make room (a browser going back through its
// chats); when none can, the load is refused (ErrLimitExceeded) without
// reading the journal. Going back to chats had no bound: a browser could
// hold every chat it had in memory.
func (e *Engine) LoadOwn(ctx context.Context, id, owner string) (*Session, error) {
	if !e.inMemory(id) {
		if err := e.roomFor(ctx, owner); err != nil {
			return nil, err
		}
	}
	return e.Load(ctx, id)
}

// idleGrace is how long a session has had no page and no work before
// roomFor takes it out of memory: one just loaded or opened for a tab
// that has not attached yet stays.
const idleGrace = 5 * time.Second

// roomFor makes room for one more of owner's sessions in memory, or says
// there is none.
func (e *Engine) roomFor(ctx context.Context, owner string) error {
	limit := e.opts.MaxLiveSessions
	if limit <= 0 || owner == "" {
		return nil
	}
	e.mu.Lock()
	n := e.perOwner[owner]
	var others []*Session
	if n >= limit {
		for id, o := range e.sessions {
			if _, opening := e.loading[id]; o.owner == owner && !opening {
				others = append(others, o)
			}
		}
	}
	e.mu.Unlock()
	for _, o := range others {
		if n < limit {
			break
		}
		left := false
		err := o.do(ctx, func() error {
			if o.idleTimer != nil && e.opts.Clock.Now().Sub(o.idleSince) >= idleGrace {
				left = o.unloadIfIdle()
			}
			return nil
		})
		if err == nil && left {
			o.logger.Debug("session unloaded: its browser went back to another chat, past its sessions in memory")
			n--
		}
	}
	if n < limit {
		return nil
	}
	return fmt.Errorf("%w: this browser has %d sessions in memory here, none without a page and work for %v, and goes back to a chat only with fewer than %d", ErrLimitExceeded, n, idleGrace, limit)
}

// listedFor reports whether session id is among owner's in the store's
// list of chats.
func (e *Engine) listedFor(ctx context.Context, id, owner string) (bool, error) {
	sums, err := e.opts.Store.Summaries(ctx, owner)
	return err == nil && slices.ContainsFunc(sums, func(s Summary) bool { return s.ID == id && s.Owner == owner }), err
}

// loadBusy loads a session its summary says is busy. A summary written
// before a crash, or one whose write failed, may say so of a session whose
// journal ends idle: then the summary is written again, or every start and
// every look for sessions no node runs would load it again.
func (e *Engine) loadBusy(ctx context.Context, id string) (*Session, error) {
	s, err := e.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	_ = s.do(ctx, func() error {
		if !s.busy() {
			s.summarize()
		}
		return nil
	})
	return s, nil
}

// Resume loads every session that had work in flight when the last process
// stopped, so its timers, backoffs and interrupted work carry on without
// waiting for a page. Call it once, after New.
func (e *Engine) Resume(ctx context.Context) error {
	sums, err := e.opts.Store.Summaries(ctx, "")
	if err != nil {
		return fmt.Errorf("failed to list sessions: %w", err)
	}
	if lister, ok := e.opts.Store.(JournalList); ok {
		// Before the gateway serves: a chat deleted just before a crash
		// is not listed again.
		if ids, err := lister.Journals(ctx); err != nil {
			e.opts.Logger.Warn("failed to list the journals", "err", err)
		} else {
			e.dropSummariesWithoutJournal(ctx, lister, ids, sums)
		}
	}
	n, elsewhere := 0, 0
	for _, sum := range sums {
		if ctx.Err() != nil {
			return ctx.Err() // stopped while starting: what is left resumes at the next start
		}
		if !sum.Busy || sum.Ended {
			continue
		}
		if _, err := e.loadBusy(ctx, sum.ID); err != nil {
			if errors.Is(err, ErrOwnedElsewhere) {
				// Another node of the cluster runs it: its work goes on there.
				elsewhere++
				continue
			}
			e.opts.Logger.Warn("failed to resume a session", "session", sum.ID, "err", err)
			continue
		}
		n++
	}
	if n > 0 || elsewhere > 0 {
		e.opts.Logger.Info("resumed sessions with work in flight", "sessions", n, "run_by_other_nodes", elsewhere)
	}
	return nil
}

// rebuild reads a session's journal and starts it where the journal ends.
func (e *Engine) rebuild(ctx context.Context, id string) (s *Session, err error) {
	s = newSession(e, id, "")
	own, err := e.own(ctx, s)
	if err != nil {
		return nil, err
	}
	s.ownership = own
	remembered := false // from then on the session gives its lease back when it leaves
	defer func() {
		if err != nil && own != nil && !remembered {
			_ = own.Release(context.WithoutCancel(ctx))
		}
	}()
	batches, err := e.opts.Store.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	var st *sessionState
	var agent *AgentConfig
	var events []Event
	var lastState json.RawMessage
	var transcript []Message
	calls := journalCalls{}
	for _, b := range batches {
		events = append(events, b.Events...)
		for _, ev := range b.Events {
			if ev.Type == EventToolStarted || ev.Type == EventToolFinished || ev.Type == EventToolApproval || ev.Type == EventToolRetrying {
				if err := calls.add(ev); err != nil {
					return nil, fmt.Errorf("%w: session %s, event %d: %w", ErrCorrupt, id, ev.Seq, err)
				}
				continue
			}
			if ev.Type != EventMessage {
				continue
			}
			var m struct {
				MessageEvent
				Parent string `json:"parent"`
			}
			if err := json.Unmarshal(ev.Frame, &m); err != nil {
				return nil, fmt.Errorf("%w: session %s, event %d: %w", ErrCorrupt, id, ev.Seq, err)
			}
			if m.Parent != "" {
				continue // a sub-agent's, in its own transcript
			}
			transcript = append(transcript, m.Message)
		}
	}
	// The last state, and the agent of the last state that carries one
	// (the states after it leave it out), read from the end: a long chat
	// has a state a step, and decoding each was a third of its load.
	for i := len(batches) - 1; i >= 0 && agent == nil; i-- {
		b := batches[i]
		if b.State == nil || st != nil && !bytes.Contains(b.State, []byte(`"agent":`)) {
			continue
		}
		var s sessionState
		if err := json.Unmarshal(b.State, &s); err != nil {
			return nil, fmt.Errorf("%w: session %s, batch %d: %w", ErrCorrupt, id, i, err)
		}
		if s.V != stateVersion && s.V != stateVersionRefs {
			return nil, fmt.Errorf("%w: session %s has state version %d, this gateway reads %d and %d", ErrCorrupt, id, s.V, stateVersion, stateVersionRefs)
		}
		if st == nil {
			st, lastState = &s, b.State
		}
		agent = s.Agent
	}
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			return nil, fmt.Errorf("%w: session %s: event %d has seq %d", ErrCorrupt, id, i+1, ev.Seq)
		}
	}
	if st == nil || agent == nil {
		return nil, fmt.Errorf("%w: session %s has no state", ErrCorrupt, id)
	}
	if err := finishedFromEvents(st.Calls, events); err != nil {
		return nil, fmt.Errorf("%w: session %s: %w", ErrCorrupt, id, err)
	}
	if st.Ended {
		return nil, fmt.Errorf("%w: session %s ended", ErrSessionClosed, id)
	}
	if e.expired(st.Updated) {
		// Retention's sweep deletes it within the hour; it is gone now.
		return nil, fmt.Errorf("%w: session %s expired, its last user message over %v ago", ErrNoSession, id, e.opts.Retain)
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrSessionClosed
	}
	s.owner = st.Owner
	// The state is a slice of the store's message (JetStream): a copy lets the message go.
	s.log.events, s.log.seq, s.log.lastState = eventListOf(events), int64(len(events)), bytes.Clone(lastState)
	s.log.setRuns(st.Runs, s.log.lastState)
	if err := s.restore(st, *agent, transcript); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	e.remember(s)
	e.wg.Add(1) // done when the session leaves memory (Session.depart)
	remembered = true
	e.mu.Unlock()
	// Not ctx: a caller gone while the resume step is stored would have
	// the load fail for a session that runs. The step fails only when the
	// session left memory, giving its lease back.
	if err := s.do(context.WithoutCancel(ctx), func() error {
		s.logger.Info("session loaded", "events", len(events), "open calls", s.open, "turn cut", st.Turn)
		calls.restore(s)
		s.resume(st.Turn, st.Turn && streamedSinceFinished(events))
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// restore fills a new session from its journal's state, before its
// goroutine runs.
func (s *Session) restore(st *sessionState, agent AgentConfig, transcript []Message) error {
	if err := s.loadAgent(agent); err != nil {
		return fmt.Errorf("failed to load session %s: %w", s.id, err)
	}
	s.agentDirty = false
	s.transcript = transcript
	s.created, s.updated, s.title = st.Created, st.Updated, st.Title
	s.nextCall, s.batches = st.NextCall, st.Batches
	s.promptWanted, s.idle = st.Prompt, st.Idle
	s.usage = st.Usage
	now := s.e.opts.Clock.Now()
	for _, tools := range st.Declared {
		s.departed = append(s.departed, newToolSet(tools))
	}
	for i, content := range st.Waiting {
		msg := Message{Role: model.RoleUser, Content: content}
		if i < len(st.WaitingIDs) {
			msg.ID = st.WaitingIDs[i]
		}
		s.addWaiting(waitingMessage{msg: msg})
	}
	for i, q := range st.Queue {
		t, err := DecodeTrigger(q.Trigger)
		if err != nil {
			return fmt.Errorf("%w: session %s, queued trigger %d: %w", ErrCorrupt, s.id, i, err)
		}
		s.queue = append(s.queue, queued{trigger: t, proposed: q.Proposed, announced: q.Announced})
	}
	batches := map[int]*batch{}
	for _, cs := range st.Calls {
		if cs.Spec == nil && cs.Settled {
			// The first durable version kept a call settled with all its
			// siblings as an id alone; its tool.started and tool.finished
			// in the journal say what is kept of it now (journalCalls).
			continue
		}
		if cs.Spec == nil {
			return fmt.Errorf("%w: session %s, call %s has no retry spec", ErrCorrupt, s.id, cs.ID)
		}
		c := &call{id: cs.ID, name: cs.Name, handler: cs.Handler, settled: cs.Settled, answeredBy: cs.AnsweredBy, run: s}
		c.args, c.proposed, c.seq = cs.Args, cs.Proposed, cs.Seq
		if cs.Input != nil {
			c.input = *cs.Input
		}
		c.spec = retrySpec{attempts: cs.Spec.Attempts, timeout: cs.Spec.Timeout, backoff: cs.Spec.Backoff,
			multiplier: cs.Spec.Multiplier, maxBackoff: cs.Spec.MaxBackoff, maxTimeout: max(cs.Spec.MaxTimeout, cs.Spec.Timeout)}
		if cs.SpecErr != "" {
			c.specErr = errors.New(cs.SpecErr)
		}
		if t := s.tools.find(c.name); t != nil {
			c.output = t.schemas.output
		} else {
			// A tool the model made up (or one a new agent dropped): its
			// metrics' label is "(undeclared)", from a bounded set.
			c.undeclared = true
		}
		c.attempt, c.deadline, c.backingOff, c.retryAt = cs.Attempt, onClock(now, cs.Deadline), cs.BackingOff, onClock(now, cs.RetryAt)
		c.started, c.attemptStarted, c.notTwice, c.approving = cs.Started, onClock(now, cs.AttemptStarted), cs.NotTwice, cs.Approving
		if cs.Reached {
			c.delivered = c.attemptStarted // before the restart; its exact time died with the process
		}
		c.awaitedPage = cs.AwaitsPage
		if cs.Finished != nil {
			c.finished = *cs.Finished
			c.refer(cs.FinishedSeq)
		}
		b := batches[cs.Batch]
		if b == nil {
			b = &batch{id: cs.Batch, cancelled: cs.Cancelled}
			batches[cs.Batch] = b
		}
		b.calls = append(b.calls, c)
		c.batch = b
		s.calls[c.id] = c
		s.live = append(s.live, c) // the state keeps them in dispatch order
		if !c.settled {
			s.open++
		}
	}
	s.restoreMessageIDs()
	return nil
}

// finishedFromEvents gives back the calls' results and errors that their
// state left to their tool.finished events (callState.FinishedSeq).
func finishedFromEvents(calls []callState, events []Event) error {
	for i := range calls {
		cs := &calls[i]
		if cs.FinishedSeq == 0 || cs.Finished == nil {
			continue
		}
		if cs.FinishedSeq < 1 || cs.FinishedSeq > int64(len(events)) || events[cs.FinishedSeq-1].Type != EventToolFinished {
			return fmt.Errorf("call %s's result is in event %d, which is not a tool.finished", cs.ID, cs.FinishedSeq)
		}
		var f ToolFinishedEvent
		if err := json.Unmarshal(events[cs.FinishedSeq-1].Frame, &f); err != nil || f.ID != cs.ID {
			return fmt.Errorf("call %s's result is in event %d, which is another's or not JSON (%v)", cs.ID, cs.FinishedSeq, err)
		}
		finished := *cs.Finished // the state's is shared with no one, but stays as read
		finished.Result, finished.Error = f.Result, f.Error
		cs.Finished = &finished
	}
	return nil
}

// streamedSinceFinished reports whether the session's model streamed text
// after its last model.finished (or model.discarded): a turn cut then
// leaves a partial reply on the pages. A sub-agent's events (parent set)
// are not the session's model's. It reads back from the journal's end, so
// it decodes only the events of the turn that was cut.
func streamedSinceFinished(events []Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		if ev.Type != EventModelDelta && ev.Type != EventModelFinished && ev.Type != EventModelDiscarded {
			continue
		}
		var f struct {
			Parent string `json:"parent"`
		}
		if json.Unmarshal(ev.Frame, &f) != nil || f.Parent != "" {
			continue
		}
		return ev.Type == EventModelDelta
	}
	return false
}

// resume carries on the work the journal says was in flight, on the session
// goroutine, as the first step after a load:
//   - a model turn cut off is discarded (pages drop its partial reply) and
//     run again;
//   - a client attempt waits for a page, its deadline unchanged: one that
//     has passed times out now, under the call's policy;
//   - a backoff resumes at its time;
//   - a worker attempt runs again when its tool is declared idempotent, and
//     otherwise settles as interrupted: whether it took effect is unknown.
//
// Pages are told to drop a cut turn's text (model.discarded) when it had
// streamed any.
func (s *Session) resume(turnCut, textCut bool) {
	if textCut {
		s.publish(EventModelDiscarded, ModelDiscardedEvent{Reason: "the session was reloaded (the gateway restarted, or another node took the session over) while the model was answering; it answers again"})
	}
	if turnCut {
		s.promptWanted = true
	}
	now := s.e.opts.Clock.Now()
	for _, c := range s.openCalls() {
		idempotent := s.tool(c.name).Idempotent
		switch {
		case c.approving && !c.deadline.After(now):
			s.approvalTimedOut(c.id)
		case c.approving: // its tool.approval is in the log: pages replay it
			s.armApprovalTimeout(c)
		case c.attempt == 0:
			// Never the case in a stored step: a call is launched in the
			// step that starts it. Launched now as it would have been, its
			// approval asked first.
			s.launch(&batch{calls: []*call{c}})
		case c.backingOff && !c.retryAt.After(now):
			s.startAttempt(c)
		case c.backingOff:
			s.armRetry(c, c.retryAt.Sub(now))
		case !c.deadline.After(now):
			s.attemptTimedOut(c.id, c.attempt, c.timeouts)
		case c.handler == HandlerClient && c.notTwice && c.reached():
			s.logger.Warn("client call interrupted by a restart: it reached its page and must not run twice", "call", c.id, "tool", c.name, "attempt", c.attempt)
			s.settle(c, outcome{code: CodeInterrupted, err: fmt.Sprintf(
				"%s reached the user's page, then the gateway restarted before its answer; it is declared idempotent: false, so it was not run again: whether it took effect is unknown. Check before calling it again.", c.name)}, "")
		case c.handler == HandlerClient:
			s.armTimeout(c, c.deadline.Sub(now))
			// The page that held it went with the process that ran the
			// session: pages see the call wait for one, as when a page
			// leaves, until one that runs the tool attaches. One that
			// waited already was said so.
			if !c.awaitedPage {
				s.publish(EventToolLeased, ToolLeasedEvent{ID: c.id, Name: c.name, Attempt: c.attempt})
			}
			s.logger.Info("client call waiting for a page after a restart", "call", c.id, "tool", c.name, "attempt", c.attempt)
		case idempotent != nil && *idempotent:
			s.armTimeout(c, c.deadline.Sub(now))
			s.logger.Info("worker call run again after a restart: its tool is idempotent", "call", c.id, "tool", c.name, "attempt", c.attempt)
			s.executeOnWorker(c, c.proposedFor(c.attempt))
		default:
			s.logger.Warn("worker call interrupted by a restart", "call", c.id, "tool", c.name, "attempt", c.attempt)
			s.settle(c, outcome{code: CodeInterrupted, err: fmt.Sprintf(
				"%s was running when the gateway restarted, and it is not declared idempotent, so it was not run again: whether it took effect is unknown. Check before calling it again.", c.name)}, "")
		}
	}
}

// armTimeout ends c's current attempt after d.
func (s *Session) armTimeout(c *call, d time.Duration) {
	c.timeouts++
	id, attempt, timeout := c.id, c.attempt, c.timeouts
	c.timer = s.e.opts.Clock.AfterFunc(d, func() {
		_ = s.post(context.Background(), func() { s.attemptTimedOut(id, attempt, timeout) })
	})
}

// armRetry starts c's next attempt after d, the backoff.
func (s *Session) armRetry(c *call, d time.Duration) {
	id, attempt := c.id, c.attempt
	c.timer = s.e.opts.Clock.AfterFunc(d, func() {
		_ = s.post(context.Background(), func() {
			if c := s.calls[id]; c != nil && !c.settled && c.backingOff && c.attempt == attempt {
				s.startAttempt(c)
			}
		})
	})
}

// unload takes the session out of memory after its current step; its
// journal keeps it. Work in flight stops here and carries on when the
// session is loaded again.
func (s *Session) unload(ctx context.Context) {
	if err := s.post(ctx, func() { s.unloading = true }); err != nil {
		return
	}
	select {
	case <-s.stopped:
	case <-ctx.Done():
	}
}

// every runs run on the engine's clock after first, then again every next
// after each run, until Close, which stops *timer.
func (e *Engine) every(timer *clock.Timer, first, next time.Duration, run func()) {
	*timer = e.opts.Clock.AfterFunc(first, func() {
		e.mu.Lock()
		closed := e.closed
		if !closed {
			e.wg.Add(1)
		}
		e.mu.Unlock()
		if closed {
			return
		}
		defer e.wg.Done()
		run()
		e.mu.Lock()
		if !e.closed {
			e.every(timer, next, next, run)
		}
		e.mu.Unlock()
	})
}

// onClock is t, a time read back from the store (a wall-clock reading
// alone), on the clock of now: now's monotonic reading carried by how far
// t is from now. Compared with a time of this process then (a deadline with
// now, a progress report's), it reads elapsed time, which a step of the
// wall clock (NTP) after the load does not move.
func onClock(now, t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return now.Add(t.Sub(now))
}

// journalCalls are the calls a journal's events started, in order, and
// whether each finished: the state keeps only the calls still open.
type journalCalls struct {
	order []string
	byID  map[string]*journalCall
}

type journalCall struct {
	name, parent string
	handler      Handler
	attempt      int
	finished     bool
	answered     bool // an answer settled it, not the gateway (a timeout, a cancel, ...)
	backingOff   bool // its last attempt ended, and the next has not started
}

// add takes a tool.started, tool.approval, tool.retrying or tool.finished
// event: a call that waits for the user's approval has not started.
func (j *journalCalls) add(ev Event) error {
	var f struct {
		ID      string    `json:"id"`
		Name    string    `json:"name"`
		Parent  string    `json:"parent"`
		Handler Handler   `json:"handler"`
		Attempt int       `json:"attempt"`
		OK      bool      `json:"ok"`
		Code    ErrorCode `json:"code"`
	}
	if err := json.Unmarshal(ev.Frame, &f); err != nil {
		return err
	}
	if j.byID == nil {
		j.byID = map[string]*journalCall{}
	}
	c := j.byID[f.ID]
	if c == nil {
		c = &journalCall{name: f.Name, parent: f.Parent}
		j.byID[f.ID] = c
		j.order = append(j.order, f.ID)
	}
	switch ev.Type {
	case EventToolFinished:
		c.finished, c.answered = true, f.OK || !settledByTheGateway(f.Code)
	case EventToolStarted:
		c.handler, c.attempt, c.backingOff = f.Handler, f.Attempt, false
	case EventToolRetrying:
		c.backingOff = true
	default:
		c.handler = f.Handler // asked for approval: no attempt yet
	}
	return nil
}

// restore gives the session back what it knew of the calls its state does
// not keep, on its goroutine: each finished call, so an id stays used (a
// sub-agent's model numbers its calls from call_1 again) and a late answer
// is told it settled, not taken by another call of that id; and each call
// of a sub-agent that did not finish, which the restart ended with its
// sub-agent (a sub-agent is not in the state): it settles now, once, as
// its parent did.
func (j *journalCalls) restore(s *Session) {
	for _, id := range j.order {
		c := j.byID[id]
		if _, open := s.calls[id]; open {
			continue
		}
		if c.finished {
			// A late answer is told the call settled when it repeats the
			// answer that settled it, else that its attempt is over.
			answeredBy := 0
			if c.answered {
				answeredBy = c.attempt
			}
			s.settled[id] = settledCall{handler: c.handler, attempt: c.attempt, answeredBy: answeredBy}
			continue
		}
		if c.parent == "" {
			continue // the state keeps every open call of the session's own
		}
		s.settled[id] = settledCall{handler: c.handler, attempt: c.attempt}
		s.logger.Warn("a sub-agent's call ended by a restart", "call", id, "tool", c.name, "parent", c.parent)
		finished := ToolFinishedEvent{ID: id, Name: c.name, Code: CodeCancelled,
			Error: fmt.Sprintf("%s was cancelled: the gateway restarted, and the sub-agent that called it ended.", c.name)}
		if c.handler == HandlerWorker && c.attempt > 0 && !c.backingOff {
			// Its request may have reached the worker, which may have
			// done what the tool does: no one knows, as for the
			// session's own worker call cut by a restart.
			finished.Code = CodeInterrupted
			finished.Error = fmt.Sprintf("%s was running when the gateway restarted, and the sub-agent that called it ended: whether it took effect is unknown.", c.name)
		}
		if _, err := s.log.publish(EventToolFinished, c.parent, finished); err != nil {
			s.logger.Error("failed to publish event", "type", EventToolFinished, "err", err)
		}
	}
}

// settledByTheGateway: a call that failed with code was settled by the
// gateway (its time ran out, it was cancelled, nobody could run it, ...),
// not by an answer.
func settledByTheGateway(code ErrorCode) bool {
	switch code {
	case CodeTimeout, CodeCancelled, CodeClientUnavailable, CodeInterrupted, CodeOutcomeUnknown, CodeDenied:
		return true
	}
	return false
}
