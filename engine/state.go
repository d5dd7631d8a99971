package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The session's state as the journal keeps it: every batch the session
// commits carries the state after its events, so a session is rebuilt from
// its last state plus the transcript folded from its message events
// (rebuild.go). The transcript is not in the state: message events carry
// every message whole.

// stateVersion is the format of sessionState; a journal of another version
// is refused with a clear error, never misread. A state whose calls leave
// a long result to its tool.finished event (callState.FinishedSeq) is
// stateVersionRefs, which this version reads too: an earlier version
// refuses such a session rather than lose the result.
const (
	stateVersion     = 1
	stateVersionRefs = 2
)

// inlineFinished is the longest result or error a settled call's state
// keeps itself. A longer one is read from its tool.finished event when the
// session loads: the state is stored at every step, and a batch of N
// parallel calls kept every result settled so far in each, N² in all (an
// outside audit's 30 results of 1 MB made a 473 MB journal).
const inlineFinished = 1024

type sessionState struct {
	V        int          `json:"v"`
	Owner    string       `json:"owner,omitempty"`
	Created  time.Time    `json:"created"`
	Updated  time.Time    `json:"updated"`
	Title    string       `json:"title,omitempty"`
	Agent    *AgentConfig `json:"agent,omitempty"` // only in a batch where it changed
	Calls    []callState  `json:"calls,omitempty"`
	NextCall int          `json:"nextCall,omitempty"`
	Batches  int          `json:"batches,omitempty"`
	Queue    []queueState `json:"queue,omitempty"`
	Waiting  []string     `json:"waiting,omitempty"`
	// WaitingIDs are the waiting messages' ids (Message.ID), in the same
	// order, when one has an id: states before it have none.
	WaitingIDs []string   `json:"waitingIds,omitempty"`
	Prompt     bool       `json:"prompt,omitempty"` // a model.prompt waits for the turn or calls
	Turn       bool       `json:"turn,omitempty"`   // a model turn is running
	Idle       bool       `json:"idle,omitempty"`
	Ended      bool       `json:"ended,omitempty"`
	Declared   [][]string `json:"declared,omitempty"` // the tools of the pages, attached or recently left
	Usage      usage      `json:"usage,omitzero"`     // what the guards count
	// Runs are the session's latest loads from the store, oldest first:
	// a page's copy of a run before them must end within what each held
	// (eventLog.heldSince).
	Runs []runMark `json:"runs,omitempty"`
}

// runMark is a load of the session: the epoch of the run it began, and
// the last seq its journal held then, or less for the oldest mark kept:
// the least of what the loads that left the window held too (setRuns).
type runMark struct {
	Epoch string `json:"epoch"`
	End   int64  `json:"end"`
}

// maxRuns is how many loads a session's state keeps: a page's copy of a
// run before them is held to the least of their ends (a refusal there
// costs a replay from the start, never an event).
const maxRuns = 16

// callState is a call of a batch that has not all settled: the calls that
// settled with all their siblings are done, and not kept (after a load, an
// answer to one is an unknown call).
type callState struct {
	ID         string     `json:"id"`
	Name       string     `json:"name,omitempty"`
	Handler    Handler    `json:"handler"`
	Settled    bool       `json:"settled,omitempty"`
	AnsweredBy int        `json:"answeredBy,omitempty"`
	Args       string     `json:"args,omitempty"`
	Spec       *specState `json:"spec,omitempty"`
	SpecErr    string     `json:"specErr,omitempty"`
	Input      *ToolInput `json:"input,omitempty"`
	Proposed   *ToolError `json:"proposed,omitempty"`
	Batch      int        `json:"batch,omitempty"`
	Cancelled  bool       `json:"cancelled,omitempty"` // its batch was cancelled
	Seq        int        `json:"seq,omitempty"`
	Attempt    int        `json:"attempt,omitempty"`
	Deadline   time.Time  `json:"deadline,omitzero"`
	// Started is when the call started (tool.started): its duration, once
	// it settles, counts from it, across restarts. A journal written
	// before it was kept has none.
	Started    time.Time `json:"started,omitzero"`
	BackingOff bool      `json:"backingOff,omitempty"`
	RetryAt    time.Time `json:"retryAt,omitzero"`
	// AttemptStarted is when the current attempt started: its progress
	// cap counts from it.
	AttemptStarted time.Time `json:"attemptStarted,omitzero"`
	// Reached: the current attempt reached its page (client calls).
	Reached bool `json:"reached,omitempty"`
	// AwaitsPage: the current client attempt waits for a page (pages were
	// told so): a load need not tell them again.
	AwaitsPage bool `json:"awaitsPage,omitempty"`
	NotTwice   bool `json:"notTwice,omitempty"`
	// Approving: the call waits for the user's approval until Deadline.
	Approving bool          `json:"approving,omitempty"`
	Finished  *ToolFinished `json:"finished,omitempty"`
	// FinishedSeq: Finished leaves its result or error to the
	// tool.finished event of this seq (version 2).
	FinishedSeq int64 `json:"finishedSeq,omitempty"`
}

type specState struct {
	Attempts   int           `json:"attempts"`
	Timeout    time.Duration `json:"timeout"`
	Backoff    time.Duration `json:"backoff"`
	Multiplier float64       `json:"multiplier"`
	MaxBackoff time.Duration `json:"maxBackoff"`
	MaxTimeout time.Duration `json:"maxTimeout,omitempty"`
}

type queueState struct {
	Trigger   json.RawMessage `json:"trigger"`
	Proposed  Decision        `json:"proposed"`
	Announced bool            `json:"announced,omitempty"`
}

// snapshot is the session's state now, for the journal, encoded by hand
// (stateenc.go) into sc's buffer: the bytes are valid while sc is not
// reused, and the event log copies them when it keeps them. refs: it
// leaves a call's result to its event (stateVersionRefs). It runs on the
// session goroutine.
func (s *Session) snapshot(sc *stateScratch) (state json.RawMessage, refs bool, err error) {
	st := &sc.state
	defer func() {
		// What the state points to is the session's: not kept in the pool.
		clear(st.Calls)
		clear(st.Queue)
		clear(st.Waiting)
		clear(st.WaitingIDs)
		clear(st.Declared)
		*st = sessionState{Calls: st.Calls[:0], Queue: st.Queue[:0], Waiting: st.Waiting[:0], WaitingIDs: st.WaitingIDs[:0], Declared: st.Declared[:0]}
	}()
	*st = sessionState{
		V: stateVersion, Owner: s.owner, Created: s.created, Updated: s.updated, Title: s.title,
		NextCall: s.nextCall, Batches: s.batches, Prompt: s.promptWanted, Turn: s.turn != nil,
		Idle: s.idle, Ended: s.ending, Usage: s.usage, Runs: s.log.runs,
		Calls: st.Calls[:0], Queue: st.Queue[:0], Waiting: st.Waiting[:0], WaitingIDs: st.WaitingIDs[:0], Declared: st.Declared[:0],
	}
	if s.agentDirty {
		st.Agent = &s.agent
	}
	live := s.live // the calls the journal keeps: kept as calls start and batches settle
	sc.specs = slices.Grow(sc.specs[:0], len(live))[:len(live)]
	for i, c := range live {
		st.Calls = append(st.Calls, c.state(&sc.specs[i]))
		refs = refs || c.ref != nil
	}
	if refs {
		st.V = stateVersionRefs
	}
	for _, q := range s.queue {
		t, err := Marshal(q.trigger)
		if err != nil {
			return nil, false, fmt.Errorf("failed to encode a queued %s trigger: %w", q.trigger.TriggerType(), err)
		}
		st.Queue = append(st.Queue, queueState{Trigger: t, Proposed: q.proposed, Announced: q.announced})
	}
	ids := false
	for _, w := range s.waiting {
		st.Waiting = append(st.Waiting, w.msg.Content)
		ids = ids || w.msg.ID != ""
	}
	if ids {
		for _, w := range s.waiting {
			st.WaitingIDs = append(st.WaitingIDs, w.msg.ID)
		}
	}
	st.Declared = s.declaredSets(st.Declared)
	b, err := appendState(sc.buf[:0], st)
	if err != nil {
		return nil, false, err
	}
	sc.buf = b
	return b, refs, nil
}

// stateScratch is what snapshot reuses from step to step, and from session
// to session: an idle session holds none.
type stateScratch struct {
	state sessionState
	specs []specState
	buf   []byte
}

var stateScratches = sync.Pool{New: func() any { return new(stateScratch) }}

// maxPooledState is the largest state buffer kept for the next snapshot.
const maxPooledState = 64 << 10

func putStateScratch(sc *stateScratch) {
	if cap(sc.buf) <= maxPooledState {
		stateScratches.Put(sc)
	}
}

// state is the journal's form of c; spec holds its retry spec, and the
// result points into c: it is valid while c does not change.
func (c *call) state(spec *specState) callState {
	cs := callState{ID: c.id, Handler: c.handler, Settled: c.settled, AnsweredBy: c.answeredBy}
	cs.Name, cs.Args, cs.Batch, cs.Cancelled, cs.Seq = c.name, c.args, c.batch.id, c.batch.cancelled, c.seq
	*spec = specState{Attempts: c.spec.attempts, Timeout: c.spec.timeout, Backoff: c.spec.backoff,
		Multiplier: c.spec.multiplier, MaxBackoff: c.spec.maxBackoff, MaxTimeout: c.spec.maxTimeout}
	cs.Spec = spec
	if c.specErr != nil {
		cs.SpecErr = c.specErr.Error()
	}
	cs.Input, cs.Proposed = &c.input, c.proposed
	cs.Attempt, cs.Deadline, cs.BackingOff, cs.RetryAt = c.attempt, c.deadline, c.backingOff, c.retryAt
	cs.Started, cs.AttemptStarted = c.started, c.attemptStarted
	cs.Reached, cs.NotTwice, cs.Approving = !c.delivered.IsZero(), c.notTwice, c.approving
	cs.AwaitsPage = c.handler == HandlerClient && c.attempt > 0 && !c.settled && !c.backingOff && c.holder == nil && !c.holderGone
	switch {
	case c.settled && c.ref != nil:
		cs.Finished, cs.FinishedSeq = &c.ref.stub, c.ref.seq
	case c.settled:
		cs.Finished = &c.finished
	}
	return cs
}
