package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clienttools/gateway/metrics"
)

// ErrSlowSubscriber: a page's stream held more frames than its buffer, so it
// was dropped rather than let it hold up the session.
var ErrSlowSubscriber = errors.New("page could not keep up")

// eventLog numbers a session's events, writes them to the store and only
// then puts them on the pages' streams (write-ahead): a page never sees an
// event the store could lose. Its lock orders everything a page receives:
// the session goroutine and the model's stream (which publishes deltas
// without a trip through the session goroutine) both write under it.
//
// The session goroutine opens a batch for each message it handles; what it
// publishes and delivers meanwhile goes to the store in one Append with the
// session's state after it, so the journal never holds half of a step. A
// batch the store refuses waits, in order, and is retried; its frames reach
// the pages once it is stored.
//
// One goroutine at a time appends (the flusher), with the lock released
// meanwhile, and takes everything waiting when it looks: what is published
// during an append (a model's next deltas, the step that ends its turn)
// goes in the next, as one Append (group commit). The session goroutine
// stores its step itself and waits for it. A delta published outside a
// step is stored by its publisher while the store is fast (slowAppend);
// while it is slow, a flusher started for it (spawn) stores it, so the
// model reads on meanwhile and its next deltas share an Append, until more
// than maxWaiting batches wait.
type eventLog struct {
	mu      sync.Mutex
	session string
	seq     int64     // the last seq handed out
	events  eventList // the latest stored events, for replays
	keep    int       // the bytes of events kept (Options.ReplayBytes)
	pins    []*pin    // events kept whatever keep says, for replays being read
	store   Store
	logger  *slog.Logger
	pages   map[*Page]struct{}
	closed  bool
	// closedBy is why: ErrUnloaded (the session left memory) or
	// ErrSessionClosed (it ended).
	closedBy error

	batch     *pendingBatch // open while the session goroutine handles a message: &open
	open      pendingBatch
	spare     []pendingItem  // a stored step's items, cleared, for the next step's
	pending   []pendingBatch // closed, not stored yet: being stored, waiting, or refused
	queued    int64          // batches ever put in pending; stored() were taken
	flushing  bool           // a flusher is appending, l.mu released
	kicked    bool           // a flusher was spawned and has not looked yet
	flushed   *sync.Cond     // on l.mu: a flusher stopped (see cond)
	spawn     func(func())   // starts a flusher; nil: publishers flush themselves
	left      func(*Page)    // tells the session a page it dropped left; nil: none (the log's own tests)
	lastTook  time.Duration  // how long the last Append took
	lastState json.RawMessage
	storeErr  error // the last Append's error, until one succeeds
	onStore   func(session string, err error)
	metrics   *metrics.Metrics
	woken     []*Page // pages with frames to write now (AttachOptions.WriteNow), once l.mu is released
	// crowded: a page's stream holds a quarter of its limit or more: the
	// publisher yields its thread once l.mu is released (writeNow).
	crowded   bool
	saying    []settledNote // the notes of batches just stored, to say once l.mu is released
	saidAhead bool          // a page's after past the last event was logged
	// epoch names this run of the session in memory (session.opened's
	// epoch). A page whose copy is of another run and goes past what the
	// journal held at a load since saw events the store lost: a turn run
	// again takes their seqs, and after alone cannot tell (heldSince).
	epoch string
	// runs are the session's latest loads, this run's last (none: a new
	// session), set as it loads and never changed: stored with each state
	// (runMark), last in it. A load changes them alone, which is no step
	// to store: until a state of this run is stored, one that differs
	// from the loaded state in its runs alone is taken as unchanged
	// (sameButRuns). runsEnd ends every state this run encodes;
	// loadedCore is the loaded state without its end (nil: not one this
	// run's states compare to).
	runs       []runMark
	runsEnd    []byte
	loadedCore []byte
}

// maxWaiting is how many batches may wait for the store before a publisher
// outside a step waits with them while a flusher works: a model streams
// faster than a slow store takes its deltas only this far.
const maxWaiting = 64

// slowAppend: an Append that took longer than this makes the next delta's
// publisher hand it to a flusher instead of waiting for it (a parked
// goroutine took about 18 µs to run once woken, in a trace of the stream
// phase; the memory store's Append takes about 1 µs).
const slowAppend = 20 * time.Microsecond

// maxSpareItems bounds the items array a session keeps for its next step.
const maxSpareItems = 64

// maxCombined bounds the frames one Append carries when it takes several
// waiting batches (one batch alone may be larger: the store's own limit
// applies to it).
const maxCombined = 256 << 10

// pendingBatch is a step of the session on its way to the store: numbered
// events for every page and deliveries for one, in the order they were made.
type pendingBatch struct {
	items []pendingItem
	state json.RawMessage
	agent bool          // state carries the agent (Batch.Agent)
	refs  bool          // state leaves a result to its event (Batch.Refs)
	notes []settledNote // said once the batch is stored
}

type pendingItem struct {
	ev   Event
	page *Page // nil: a session event, for every page
}

// note keeps n, a settled call's, with the step's batch, to be said once
// the store takes the batch, and not at all when it is fenced: that
// outcome is not the session's, whose node now settles the call its own
// way (a node woken from a pause said a call timed out that the node
// which took its session over had settled ok). A batch the store refused
// first waits with its notes. Outside a step n is said at once.
func (l *eventLog) note(n settledNote) {
	l.mu.Lock()
	if l.batch == nil {
		l.mu.Unlock()
		n.say()
		return
	}
	l.batch.notes = append(l.batch.notes, n)
	l.mu.Unlock()
}

// begin opens the batch of one step of the session goroutine.
func (l *eventLog) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = pendingBatch{items: l.spare}
	l.spare = nil
	l.batch = &l.open
}

// commit closes the batch with the session's state after it and stores it,
// with any batch still waiting before it; on success its frames go to the
// pages. It returns once the batch is stored or the store refused it, and
// reports the store's error, and false when nothing changed. state is
// copied when it is kept: the caller may reuse it. agent: state carries the
// agent's configuration (Batch.Agent); refs: it leaves a result to its
// event (Batch.Refs).
func (l *eventLog) commit(state json.RawMessage, agent, refs bool) (changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.batch
	l.batch = nil
	if b == nil || (len(b.items) == 0 && (bytes.Equal(state, l.lastState) || l.sameButRuns(state))) {
		if b != nil {
			l.spare = b.items // and its notes go with it: nothing was stored
		}
		l.flush(l.queued) // what the store refused before, again
		return false, l.storeErr
	}
	b.state, b.agent, b.refs = bytes.Clone(state), agent && state != nil, refs && state != nil
	l.queue(*b)
	mine := l.queued
	for {
		l.flush(mine)
		if l.stored() >= mine {
			return true, nil
		}
		if !l.flushing && l.storeErr != nil {
			return true, l.storeErr
		}
		l.cond().Wait() // another flusher has it
	}
}

// queue puts b after the batches waiting; l.mu is held.
func (l *eventLog) queue(b pendingBatch) {
	l.pending = append(l.pending, b)
	l.queued++
}

// stored is how many batches the store has taken: pending[0] is batch
// stored()+1. l.mu is held.
func (l *eventLog) stored() int64 { return l.queued - int64(len(l.pending)) }

// cond is l.flushed, made on first use; l.mu is held.
func (l *eventLog) cond() *sync.Cond {
	if l.flushed == nil {
		l.flushed = sync.NewCond(&l.mu)
	}
	return l.flushed
}

// flush stores the waiting batches in order and hands their frames to the
// pages, until batch number until is stored (0: until none waits; a
// flusher goes on with what waits after it) or the store refuses one. l.mu
// is held, and released during each Append. While another goroutine
// flushes it returns at once: that one takes what waits.
func (l *eventLog) flush(until int64) {
	if l.flushing {
		return
	}
	if l.spawn == nil {
		until = 0
	}
	l.flushing = true
	defer func() {
		l.flushing = false
		if len(l.pending) > 0 && l.storeErr == nil {
			l.kick() // what came after until
		}
		l.cond().Broadcast()
	}()
	for len(l.pending) > 0 && (until == 0 || l.stored() < until) {
		n, batch := l.combine()
		l.mu.Unlock()
		start := time.Now()
		err := l.store.Append(context.Background(), l.session, batch)
		took := time.Since(start)
		l.metrics.StoreAppend(took, err)
		l.mu.Lock()
		l.lastTook = took
		if err != nil {
			switch {
			case errors.Is(err, ErrFenced):
				// Another node runs the session now: a take-over, not a
				// store that fails (the session leaves memory).
				l.logger.Warn("the session's events were refused: another node runs it now", "session", l.session, "err", err)
			case l.storeErr == nil:
				l.logger.Error("failed to store the session's events: they wait, and the session takes no new turn", "session", l.session, "err", err)
			}
			l.storeErr = err
			if l.onStore != nil {
				l.onStore(l.session, err)
			}
			return
		}
		if l.storeErr != nil {
			l.logger.Info("the store took the session's events again", "session", l.session)
			l.storeErr = nil
			if l.onStore != nil {
				l.onStore(l.session, nil)
			}
		}
		l.events.append(batch.Events...)
		l.events.trim(l.keep, l.pinned())
		for i := range n {
			b := &l.pending[i]
			if b.state != nil {
				l.lastState, l.loadedCore = b.state, nil // this run's runs are stored
			}
			l.saying = append(l.saying, b.notes...)
			b.notes = nil
			for _, it := range b.items {
				if it.page == nil {
					for p := range l.pages {
						l.push(p, it.ev)
					}
				} else if _, ok := l.pages[it.page]; ok {
					l.push(it.page, it.ev)
				}
			}
			// The frames are the pages' and the list's now: a step's
			// items array serves the next step.
			if b.state != nil && cap(b.items) > cap(l.spare) && cap(b.items) <= maxSpareItems {
				clear(b.items)
				l.spare = b.items[:0]
			}
		}
		// Keep pending's array: what waits moves to its front.
		left := copy(l.pending, l.pending[n:])
		clear(l.pending[left:])
		l.pending = l.pending[:left]
		l.cond().Broadcast()
		l.writeNow()
	}
}

// writeNow says the stored batches' notes, then lets the pages that asked
// write what was just pushed to them, with l.mu released (it is held, and
// held again on return): a log line's write holds up no delta (a step
// that waits for its batch to be stored still waits for this flusher).
// Flushing keeps other publishers' batches for this loop meanwhile, and
// l.saying is the flusher's alone.
func (l *eventLog) writeNow() {
	if len(l.woken) == 0 && len(l.saying) == 0 && !l.crowded {
		return
	}
	woken, saying, crowded := l.woken, l.saying, l.crowded
	l.woken, l.crowded = nil, false
	l.mu.Unlock()
	for i, n := range saying {
		n.say()
		saying[i] = settledNote{}
	}
	for i, p := range woken {
		p.now()
		woken[i] = nil
	}
	if crowded {
		// A burst (a model's stream catching up) fills a page's stream
		// faster than its writer, which waits for a thread while this
		// one publishes, takes it: the writers run before the next
		// event, and only a page that does not read overflows. Never a
		// wait: a slow page slows no one.
		runtime.Gosched()
	}
	l.mu.Lock()
	if l.woken == nil {
		l.woken = woken[:0] // keep the array
	}
	l.saying = saying[:0]
}

// combine makes one Append of the batches at the head of pending: the
// first, and those after it while the ones taken carry no state (the
// model's deltas before the step that follows them) and maxCombined is not
// passed. A state is the session's whole state after its step, so two
// steps never share an Append: the second's state would hide what the
// first's wrote alone (the agent config is written only when it changed).
// l.mu is held.
func (l *eventLog) combine() (n int, batch Batch) {
	size, events := 0, 0
	for n < len(l.pending) {
		b := &l.pending[n]
		weight := len(b.state)
		for _, it := range b.items {
			weight += len(it.ev.Frame)
		}
		if n > 0 && size+weight > maxCombined {
			break
		}
		size += weight
		for _, it := range b.items {
			if it.page == nil {
				events++
			}
		}
		n++
		if b.state != nil {
			batch.State, batch.Agent, batch.Refs = b.state, b.agent, b.refs
			break
		}
	}
	if events > 0 {
		// Sized once: the store may keep the slice (Store.Append).
		batch.Events = make([]Event, 0, events)
		for _, b := range l.pending[:n] {
			for _, it := range b.items {
				if it.page == nil {
					batch.Events = append(batch.Events, it.ev)
				}
			}
		}
	}
	return n, batch
}

// kick starts a flusher for what waits, unless one runs or is about to;
// l.mu is held.
func (l *eventLog) kick() {
	if l.flushing || l.kicked || l.spawn == nil {
		return
	}
	l.kicked = true
	l.spawn(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.kicked = false
		l.flush(0)
		l.cond().Broadcast() // for settle, when another flusher had it
	})
}

// settle waits until no flusher runs or is about to: after close, nothing
// of the session's is appended once it returns.
func (l *eventLog) settle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing || l.kicked {
		l.cond().Wait()
	}
}

// unstored is how many batches wait for the store, and its error.
func (l *eventLog) unstored() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending), l.storeErr
}

// failing returns the store's error while batches wait for it.
func (l *eventLog) failing() error {
	if n, err := l.unstored(); n > 0 {
		return err
	}
	return nil
}

// publish gives payload the next seq. In a batch it waits for the batch's
// commit; outside one (the model's deltas) it is stored and sent at once.
func (l *eventLog) publish(typ, parent string, payload any) (Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Event{}, ErrSessionClosed
	}
	frame, err := encodeEvent(typ, l.seq+1, parent, payload)
	if err != nil {
		return Event{}, fmt.Errorf("failed to encode %s event: %w", typ, err)
	}
	l.seq++
	ev := Event{Seq: l.seq, Type: typ, Frame: frame}
	l.add(pendingItem{ev: ev})
	return ev, nil
}

// deliver puts a page's own frame on its stream, after everything put there
// before it. It reports false when the page is no longer attached.
func (l *eventLog) deliver(p *Page, typ string, frame json.RawMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.pages[p]; !ok {
		return false
	}
	l.add(pendingItem{ev: Event{Type: typ, Frame: frame}, page: p})
	return true
}

// add puts an item in the open batch, or in a batch of its own for a
// flusher to store (see eventLog); l.mu is held.
func (l *eventLog) add(it pendingItem) {
	if l.batch != nil {
		l.batch.items = append(l.batch.items, it)
		return
	}
	l.queue(pendingBatch{items: []pendingItem{it}})
	switch {
	case l.flushing || l.kicked:
		// The flusher at work takes it.
	case l.lastTook < slowAppend:
		l.flush(l.queued)
	default:
		l.kick()
	}
	for (l.flushing || l.kicked) && len(l.pending) > maxWaiting {
		l.cond().Wait()
	}
}

// push appends ev to p's stream; l.mu is held. A page that has not taken
// its frames for p.limit frames is dropped.
func (l *eventLog) push(p *Page, ev Event) {
	if p.pushed >= p.limit {
		p.queue = nil
		l.drop(p, ErrSlowSubscriber)
		return
	}
	p.pushed++
	p.queue = append(p.queue, ev)
	if p.pushed >= p.limit/4 {
		l.crowded = true
	}
	if len(p.queue) > 1 {
		return
	}
	if p.now == nil {
		p.signal()
		return
	}
	p.notify()
	l.woken = append(l.woken, p) // its WriteNow, once l.mu is released (writeNow)
}

// startOf reports whether is took a tool.started or tool.approval of call
// id among the events kept in memory, asking from the newest: is decodes
// the frame (its text may name id inside another call's input).
func (l *eventLog) startOf(id string, is func(Event) bool) bool {
	needle := AppendJSONString([]byte(`"id":`), id)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events.blocks) - 1; i >= 0; i-- {
		b := l.events.blocks[i]
		for j := len(b) - 1; j >= 0; j-- {
			ev := b[j]
			if (ev.Type == EventToolStarted || ev.Type == EventToolApproval) && bytes.Contains(ev.Frame, needle) && is(ev) {
				return true
			}
		}
	}
	return false
}

// attach puts session.opened and the stored events after `after` on p's
// stream, then adds p to the pages every later event goes to: no gap and no
// overlap between the replay and what follows. older holds the events
// from after+1 on that the list no longer kept when pn was taken, read
// from the store; pn goes, and the list keeps its latest events again.
func (l *eventLog) attach(p *Page, after int64, older []Event, pn *pin, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unpinLocked(pn)
	if l.closed {
		return cmp.Or(l.closedBy, ErrSessionClosed)
	}
	// pinFor refused a copy ahead of the journal (ahead): the events
	// only grew since, and the runs never change.
	last := int64(l.events.len())
	if after < 0 {
		after = 0
	}
	first := int64(l.events.first())
	if after+int64(len(older)) < first-1 {
		// The pin kept them: only a bug gets here.
		return fmt.Errorf("the replay after %d has %d events from the store, and the session keeps its events from %d on", after, len(older), first)
	}
	opened, err := EncodeFrame(FrameSessionOpened, SessionOpenedFrame{Session: l.session, Seq: last, Page: p.id, Epoch: l.epoch, Now: FormatDeadline(now), Limits: &p.limits})
	if err != nil {
		return err
	}
	// The replay does not count against the page's buffer: the page asked
	// for it. Seqs are contiguous from 1.
	p.queue = make([]Event, 0, last-after+1)
	p.queue = append(p.queue, Event{Type: FrameSessionOpened, Frame: opened})
	if after < first-1 {
		p.queue = append(p.queue, older[:first-1-after]...)
		after = first - 1
	}
	p.queue = l.events.appendAfter(p.queue, int(after))
	// A session loaded from its journal keeps every event until a page
	// took its replay (a chat opened from its start, read once), or it
	// stores its next events.
	l.events.trim(l.keep, l.pinned())
	l.pages[p] = struct{}{}
	p.signal()
	return nil
}

// sameButRuns reports whether state is the state the session was loaded
// with but for the runs its load added; l.mu is held.
func (l *eventLog) sameButRuns(state json.RawMessage) bool {
	core, ok := bytes.CutSuffix(state, l.runsEnd)
	return ok && l.loadedCore != nil && bytes.Equal(core, l.loadedCore)
}

// setRuns sets the session's loads, this one last (its journal holding
// l.seq events), as it is loaded with state, which ended with stored (the
// runs in it); before the session runs.
func (l *eventLog) setRuns(stored []runMark, state json.RawMessage) {
	if len(stored) > 0 {
		// This run's epoch names the run it loads after: should this
		// run store no step (a page opens the chat, and nothing happens
		// in it), its epoch is in no mark, and heldSince places it by
		// that one.
		l.epoch += "." + ownEpoch(stored[len(stored)-1].Epoch)
	}
	kept := len(stored) - min(len(stored), maxRuns-1)
	l.runs = append(slices.Clone(stored[kept:]), runMark{Epoch: l.epoch, End: l.seq})
	for _, r := range stored[:kept] {
		// A load that leaves the window hands what its journal held on to
		// the oldest kept: a copy of a run before them all is held to the
		// least of every load since, as heldSince reads it, and a copy of
		// the oldest kept's own run never reads its mark.
		l.runs[0].End = min(l.runs[0].End, r.End)
	}
	l.runsEnd = appendRunsEnd(nil, l.runs)
	if core, ok := bytes.CutSuffix(state, appendRunsEnd(nil, stored)); ok {
		l.loadedCore = core
	}
}

// ahead refuses a page whose copy of the session goes past the events
// the journal has: a store that lost its tail (damage, a disk that lost
// its last writes). The SDK opens the session again from its start. l.mu
// is held.
func (l *eventLog) ahead(after int64, epoch string) error {
	last := int64(l.events.len())
	switch {
	case after > last:
		l.sayAhead("last", after, last)
		return badRequest("after %d is beyond the session's last event %d (the page's copy is not the gateway's: open the session from its start)", after, last)
	case epoch == "" || epoch == l.epoch:
		return nil
	}
	if held := l.heldSince(epoch); after > held {
		l.sayAhead("held at its load", after, held)
		return badRequest("after %d is beyond the %d events the session's journal held when it was loaded, and the page's copy is of a run before: it holds events the store lost, whose seqs the events since have taken (open the session from its start)", after, held)
	}
	return nil
}

// heldSince is the least of what the journal held at the loads since the
// run epoch names (for a run no mark names, that stored no step: since the
// run it loaded after, as its epoch says; at every load it remembers, for
// a run it cannot place: one before them), this run's included; 0 for a session new in this run,
// which no other run had: a copy of that run that goes past it holds
// events the store lost. l.mu is held.
func (l *eventLog) heldSince(epoch string) int64 {
	if len(l.runs) == 0 {
		return 0
	}
	since := -1
	for i, r := range l.runs {
		if r.Epoch == epoch {
			since = i + 1
		}
	}
	if _, after, ok := strings.Cut(epoch, "."); ok && since < 0 {
		// A run that stored no step, whose mark is in no state: its
		// pages hold what the journal held at its load, which came after
		// the run its epoch names, and before every load since.
		for i, r := range l.runs {
			if ownEpoch(r.Epoch) == after {
				since = i + 1
			}
		}
	}
	since = max(since, 0)
	held := l.runs[len(l.runs)-1].End // this run's: never after epoch's
	for _, r := range l.runs[since:] {
		held = min(held, r.End)
	}
	return held
}

// ownEpoch is a run's own part of its epoch, without the run it loaded
// after (an epoch of a gateway before them is its own part whole).
func ownEpoch(epoch string) string {
	own, _, _ := strings.Cut(epoch, ".")
	return own
}

// sayAhead logs, once, that a page saw events past the journal's last
// (what says which: the last now, or the one it held at a load); l.mu is
// held. Once: any client can ask again, as often as it likes.
func (l *eventLog) sayAhead(what string, after, last int64) {
	if !l.saidAhead {
		l.saidAhead = true
		l.logger.Warn("a page has seen events past the session's last: the store may have lost them", "session", l.session, "after", after, what, last)
	}
}

// pin is a replay's hold on the events the session keeps, from seq on,
// while the events before them are read from the store (Session.Attach):
// the read is one, however many events the session stores meanwhile.
type pin struct{ seq int64 }

// pinFor returns the seq of the first event the list keeps, and a pin on
// the events from there or from after+1, whichever is later, until attach
// or unpin lets it go; once the session left, why (ErrUnloaded or
// ErrSessionClosed).
func (l *eventLog) pinFor(after int64, epoch string) (int64, *pin, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, nil, cmp.Or(l.closedBy, ErrSessionClosed)
	}
	if err := l.ahead(after, epoch); err != nil {
		return 0, nil, err // before a read of the store it would refuse
	}
	first := int64(l.events.first())
	pn := &pin{seq: max(after+1, first)}
	l.pins = append(l.pins, pn)
	return first, pn, nil
}

// unpin lets pn go, if attach has not.
func (l *eventLog) unpin(pn *pin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unpinLocked(pn)
}

func (l *eventLog) unpinLocked(pn *pin) {
	if i := slices.Index(l.pins, pn); i >= 0 {
		l.pins = slices.Delete(l.pins, i, i+1)
	}
}

// pinned is the lowest seq a pin holds, 0 when none does; l.mu is held.
func (l *eventLog) pinned() int {
	lowest := int64(0)
	for _, pn := range l.pins {
		if lowest == 0 || pn.seq < lowest {
			lowest = pn.seq
		}
	}
	return int(lowest)
}

// kept is the seq of the first event the session keeps for replays.
func (l *eventLog) kept() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.events.first())
}

// drop ends p's stream with err (nil: the page detached); l.mu is held.
// A page dropped for falling behind has left the session as one that
// detached has: its owner may take seconds to see it (a socket's close
// handshake), and the attempts it holds move to a live page now.
func (l *eventLog) drop(p *Page, err error) {
	if _, ok := l.pages[p]; !ok {
		return
	}
	delete(l.pages, p)
	p.err = err
	close(p.done)
	p.signal()
	if errors.Is(err, ErrSlowSubscriber) && l.left != nil {
		l.left(p)
	}
}

// take hands p's queued frames over; see Page.Take.
func (l *eventLog) take(p *Page, buf []Event) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := p.queue
	p.queue = buf[:0]
	if cap(buf) > 2*max(p.limit, maxBlock) {
		p.queue = nil // a replay's array: the live frames need far less
	}
	p.pushed = 0
	return out
}

// lastSeq is the seq of the latest stored event.
func (l *eventLog) lastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.events.len())
}

// close ends every page's stream with err, after what is queued on it;
// later publishes fail.
func (l *eventLog) close(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed, l.closedBy = true, err
	for p := range l.pages {
		l.drop(p, err)
	}
}
