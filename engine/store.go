package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rivo/uniseg"
)

// Store keeps sessions: each session's journal, the batches of events and
// the state the engine rebuilds the session from, and a summary of each for
// listing a browser's chats and for retention. The engine appends to a
// session from one goroutine at a time, in order, and reads a journal
// before the session runs, and while it runs for a page's replay from
// before the events it keeps in memory (Options.ReplayBytes): a Load may
// come while the session's Appends do. It returns the journal from its
// start, which may end before the last Append where replicas lag (the
// engine reads again). Implementations: MemoryStore here, and the NATS
// JetStream store in store/jetstream; store/storetest holds the contract
// tests both pass.
type Store interface {
	// Append adds a batch to the session's journal, after every batch
	// before it. It returns once the batch is stored: an error means it may
	// not be, and the engine will append it again. ctx has no deadline
	// (the step waits for its batch, whatever it takes): a store bounds
	// each call itself, as the JetStream store does, and returns an error
	// rather than hang the session. The engine never writes
	// to b's slices (its events, their frames, its state) once it passed
	// them: a store may keep them as they are.
	Append(ctx context.Context, session string, b Batch) error
	// Load returns the session's journal, or ErrNoSession: every event, in
	// order, and the states the engine reads back, in the order they were
	// appended: at least the last, and the last of a batch with Agent set.
	// A store may leave out the other states and join batches (MemoryStore
	// does, so that a long session holds only what a load reads); one that
	// returns every batch as appended (the JetStream store) keeps it too.
	Load(ctx context.Context, session string) ([]Batch, error)
	// Summarize records the session's summary, replacing the last one.
	// As for Append, ctx has no deadline: the store bounds the call.
	Summarize(ctx context.Context, s Summary) error
	// Summaries lists the summaries of owner's sessions, or of every
	// session when owner is "", newest first.
	Summaries(ctx context.Context, owner string) ([]Summary, error)
	// Delete forgets a session: its journal and its summary. One that
	// fails part way leaves the session as it was, or one that Load
	// answers ErrNoSession for (and deletes what is left of): never a
	// journal that Load returns with steps missing.
	Delete(ctx context.Context, session string) error
}

// JournalList is a Store that lists its journals, for the retention sweep:
// a journal whose summary is gone (its bucket lost, a summary that does not
// read back) is named by no summary, and was kept for ever.
type JournalList interface {
	// Journals returns the sessions that have a journal.
	Journals(ctx context.Context) ([]string, error)
	// JournalUpdated is when the session's journal was last appended to,
	// or ErrNoSession.
	JournalUpdated(ctx context.Context, session string) (time.Time, error)
}

// JournalFrom is a Store that reads a journal from a given event on: a
// page that resumes in the middle of a long chat, before the events the
// session keeps in memory, then costs a read of what it lacks, not of the
// whole journal. The engine reads with Load from a Store without it.
type JournalFrom interface {
	// LoadFrom returns the session's batches from the one that holds event
	// from on, in order, or ErrNoSession; it may start at an earlier
	// batch, as far back as the journal's start. A batch's State may be
	// left out: a replay reads the events. As with Load, the journal may
	// end before the last Append where replicas lag.
	LoadFrom(ctx context.Context, session string, from int64) ([]Batch, error)
}

// SummaryFeed is a Store whose summaries can be read as they change: a
// cluster's nodes read it at each look for sessions with work in flight
// that no node runs (Options.Adopt), at a cost that follows what was
// written since the last look, not what the store keeps. A Store that
// nodes share (Owners) implements it, or its nodes do not look.
type SummaryFeed interface {
	// SummariesChanged returns the summaries written after cursor, each
	// as last written, and the cursor to pass next time. Cursor 0 lists
	// every summary the store keeps, and so may a store that cannot read
	// from cursor: Changes.Whole says so. A summary deleted after cursor
	// does not come. On an error, Changes may hold what was read before
	// it, and the cursor that follows that.
	SummariesChanged(ctx context.Context, cursor uint64) (Changes, error)
}

// Changes is what SummaryFeed.SummariesChanged returns.
type Changes struct {
	Summaries []Summary
	// Cursor is where the next read starts: it follows Summaries.
	Cursor uint64
	// Whole: Summaries is every summary the store keeps, and what a
	// reader knew from earlier reads is to be forgotten.
	Whole bool
}

// Batch is one step of a session in its journal: the events it published,
// seq contiguous with the batch before, and the session's state after them
// (nil for a batch of a model's deltas, which change no state).
type Batch struct {
	Events []Event
	State  json.RawMessage
	// Agent: State carries the agent's configuration, which the states
	// after it leave out until it changes again, so a store that keeps
	// only the last state keeps this one too (Store.Load). Set by the
	// engine on Append; a store need not keep it.
	Agent bool
	// Refs: State leaves a call's result to the event that holds it
	// (state version 2), which a gateway version before it cannot read.
	// Set by the engine; a store that says which versions may read its
	// data marks it before storing such a batch.
	Refs bool
}

// Summary is what a list of chats shows of a session, and what retention
// and the start of the gateway need.
type Summary struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner,omitempty"`
	Title   string    `json:"title,omitempty"` // from the first user message
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"` // the last user message, or the creation
	Ended   bool      `json:"ended,omitempty"`
	// Busy: work was in flight at the last write (a call, a model turn, a
	// queued message), so the engine loads the session when it starts.
	Busy bool `json:"busy,omitempty"`
}

// Sentinel errors of stores.
var (
	// ErrNoSession: the store has no such session.
	ErrNoSession = errors.New("no such session")
	// ErrSeqGap: a batch's events do not follow the journal's last event.
	ErrSeqGap = errors.New("event seq out of order")
	// ErrStoreUnavailable wraps a store's failure: the session takes no new
	// turn until the store takes its events again.
	ErrStoreUnavailable = errors.New("the session store is unavailable")
	// ErrFenced: an append did not follow the journal's last batch (another
	// node appended meanwhile), or this node's lease on the session may have
	// expired. The session leaves memory; its journal says what happened.
	ErrFenced = errors.New("the journal is another node's now")
)

// CheckBatch checks that b's events follow last, the journal's last seq, and
// returns the seq of its last event.
func CheckBatch(last int64, b Batch) (int64, error) {
	for _, ev := range b.Events {
		if ev.Seq != last+1 {
			return last, fmt.Errorf("%w: event %d after %d", ErrSeqGap, ev.Seq, last)
		}
		last = ev.Seq
	}
	return last, nil
}

// SortSummaries puts the newest first (by Updated, then Created, then id).
func SortSummaries(s []Summary) {
	slices.SortFunc(s, func(a, b Summary) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// MemoryStore is a Store in memory, safe for concurrent use. It forgets
// everything when the process ends: tests, benchmarks, and --store memory.
// It keeps of a session's journal what a load reads back (Store.Load): the
// events, the last state and the last that carried the agent, so a long
// session's memory grows with its events, not with its steps.
type MemoryStore struct {
	mu        sync.RWMutex
	journals  map[string]memJournal // by value: no object of its own per session
	summaries map[string]Summary
	// owned indexes summaries by owner: a browser's list is its own
	// sessions, not a pass over every session under the lock.
	owned map[string]map[string]struct{}
	// Fail, when set, is asked before every Append: a non-nil error fails
	// it, as a full disk would (tests).
	Fail func(session string, b Batch) error
}

// memJournal is what a MemoryStore keeps of a session's journal. It stays
// within a map's largest inline value (128 bytes): a larger one is an
// object of its own per session, which a parked session keeps among the
// freed objects of its time in memory, holding their spans in use
// (TestMemJournalFitsItsMap). Its last event's seq is its events' count:
// a batch's events follow the last (CheckBatch), from 1.
type memJournal struct {
	events     eventList
	state      json.RawMessage // the last state appended
	agent      json.RawMessage // the last state that carried the agent
	stateAt    int             // events appended up to state's batch
	agentAt    int             // events appended up to agent's batch
	stateAgent bool            // state carries the agent: it is agent
}

var (
	_ Store       = (*MemoryStore)(nil)
	_ JournalFrom = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{journals: map[string]memJournal{}, summaries: map[string]Summary{}, owned: map[string]map[string]struct{}{}}
}

// Append implements Store.
func (m *MemoryStore) Append(_ context.Context, session string, b Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		if err := m.Fail(session, b); err != nil {
			return err
		}
	}
	j := m.journals[session]
	if _, err := CheckBatch(int64(j.events.len()), b); err != nil {
		return err
	}
	// The events are never written to again (Store.Append): keep them,
	// not copies of their frames.
	j.events.append(b.Events...)
	if b.State != nil {
		n := j.events.len()
		if b.Agent {
			j.agent, j.agentAt = b.State, n
		}
		j.state, j.stateAgent, j.stateAt = b.State, b.Agent, n
	}
	m.journals[session] = j
	return nil
}

// Load implements Store: the events up to the state that carried the
// agent with that state, when a later one is the last; the events up to
// the last state with it; the events after it.
func (m *MemoryStore) Load(_ context.Context, session string) ([]Batch, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	j, ok := m.journals[session]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSession, session)
	}
	events := j.events.appendAfter(make([]Event, 0, j.events.len()), 0)
	var out []Batch
	from := 0
	add := func(to int, state json.RawMessage, agent bool) {
		out = append(out, Batch{Events: events[from:to:to], State: state, Agent: agent})
		from = to
	}
	if j.agent != nil && !j.stateAgent {
		add(j.agentAt, j.agent, true)
	}
	if j.state != nil {
		add(j.stateAt, j.state, j.stateAgent)
	}
	if from < len(events) || len(out) == 0 {
		add(len(events), nil, false)
	}
	return out, nil
}

// LoadFrom implements JournalFrom: the events from from on, in one batch
// without a state.
func (m *MemoryStore) LoadFrom(_ context.Context, session string, from int64) ([]Batch, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	j, ok := m.journals[session]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSession, session)
	}
	skip := int(min(max(from-1, 0), int64(j.events.len())))
	return []Batch{{Events: j.events.appendAfter(make([]Event, 0, j.events.len()-skip), skip)}}, nil
}

// Summarize implements Store.
func (m *MemoryStore) Summarize(_ context.Context, s Summary) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.summaries[s.ID]; ok && old.Owner != s.Owner {
		m.disown(old)
	}
	m.summaries[s.ID] = s
	ids := m.owned[s.Owner]
	if ids == nil {
		ids = map[string]struct{}{}
		m.owned[s.Owner] = ids
	}
	ids[s.ID] = struct{}{}
	return nil
}

// disown takes s out of its owner's index; m.mu is held.
func (m *MemoryStore) disown(s Summary) {
	ids := m.owned[s.Owner]
	delete(ids, s.ID)
	if len(ids) == 0 {
		delete(m.owned, s.Owner)
	}
}

// Summaries implements Store.
func (m *MemoryStore) Summaries(_ context.Context, owner string) ([]Summary, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Summary
	if owner == "" {
		out = make([]Summary, 0, len(m.summaries))
		for _, s := range m.summaries {
			out = append(out, s)
		}
	} else {
		ids := m.owned[owner]
		out = make([]Summary, 0, len(ids))
		for id := range ids {
			out = append(out, m.summaries[id])
		}
	}
	SortSummaries(out)
	return out, nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.journals, session)
	if s, ok := m.summaries[session]; ok {
		m.disown(s)
		delete(m.summaries, session)
	}
	return nil
}

// titleOf is a chat's title from its first user message: one line, at most
// 80 characters.
func titleOf(content string) string {
	t := strings.Join(strings.Fields(strings.Map(titleRune, content)), " ")
	// Cut between characters as a reader sees them (grapheme clusters: a
	// flag, a family's emoji, a letter and its accent), not inside one.
	rest := t
	for n := 1; rest != ""; n++ {
		_, tail, _, _ := uniseg.FirstGraphemeClusterInString(rest, -1)
		if n == 80 && tail != "" {
			return strings.TrimSpace(t[:len(t)-len(rest)]) + "…"
		}
		rest = tail
	}
	return t
}

// titleRune keeps a rune in a chat's title, but for control characters (a
// NUL, an escape; white space is Fields' to join) and the ones that reorder
// the text around them (a right-to-left override makes
// "invoice \u202efdp.exe" read as a .pdf), dropped.
func titleRune(r rune) rune {
	switch {
	case unicode.IsSpace(r):
		return r
	case unicode.IsControl(r), r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069',
		r == '\u200e', r == '\u200f', r == '\u061c': // and the direction marks
		return -1
	}
	return r
}
