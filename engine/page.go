package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/clienttools/gateway/clock"
)

// Limits on what one page may declare.
const (
	// DefaultMaxPageTools is how many client tools one page may declare.
	DefaultMaxPageTools = 128
	// MaxToolNameBytes is the longest tool name a page may declare: the
	// providers' own limit on a tool's name.
	MaxToolNameBytes = 64
	// DefaultPageBuffer is AttachOptions.Buffer's default: frames a page's
	// stream holds for a reader that has not taken them (a burst of a
	// turn's events), past which the page is dropped (ErrSlowSubscriber).
	DefaultPageBuffer = 256
	// DefaultMaxMessageBytes is the longest user message a session takes:
	// a long document pasted whole, and far less than a model's context.
	DefaultMaxMessageBytes = 256 << 10
	// maxDeparted is how many departed pages' declarations a session keeps,
	// so a call made while its page reloads waits instead of failing.
	maxDeparted = 4
)

// ErrLimitExceeded: a request asks for more than a documented limit.
var ErrLimitExceeded = errors.New("limit exceeded")

// ErrBudgetSpent is an ErrLimitExceeded of its own: the session used its
// token budget, and takes no more messages until its worker raises it. A
// message refused for it would not be taken later either, as one too long
// or one past a browser's allowance may be. It reads as ErrLimitExceeded:
// the error that wraps it says what was spent.
var ErrBudgetSpent error = budgetSpent{}

type budgetSpent struct{}

func (budgetSpent) Error() string { return ErrLimitExceeded.Error() }
func (budgetSpent) Unwrap() error { return ErrLimitExceeded }

// AttachOptions describe a page joining a session.
type AttachOptions struct {
	// After is the seq of the last event the page has seen: the stream
	// starts with session.opened, then replays every event after it. The
	// events before those the session keeps in memory are read from the
	// store first (Options.ReplayBytes): Attach then waits for that read,
	// and fails with ErrStoreUnavailable if the store cannot give them.
	After int64
	// Epoch is the epoch of the session.opened the page's copy came
	// with ("": unknown, not checked). A copy of an earlier run of the
	// session in memory whose After goes past what the journal held when
	// this run loaded it saw events the store lost: refused, as an After
	// past the last event is.
	Epoch string
	// Tools are the client tools the page can run, at most MaxPageTools
	// names of at most MaxToolNameBytes each. They replace nothing: every
	// page declares its own, and the session's set is the union of its
	// pages' (and of the pages that left last, see docs/protocol.md).
	Tools []string
	// AnyClientTool says the page runs every client tool, whatever its
	// name (Tools are then moot): a front end whose app decides in its own
	// code which tools it runs, as the AI SDK's onToolCall does, including a
	// sub-agent's tools the session's agent never declared. Default false.
	AnyClientTool bool
	// Handoff says the page hands a client call to the browser's own code
	// and ends, and the answer comes on a later page (a request of the HTTP
	// front ends): its leaving does not make the outcome of a call it was
	// delivered unknown. A call of a tool declared idempotent: false then
	// waits for that answer, under its deadline, instead of settling
	// outcome_unknown; like any call whose page left, it is delivered again
	// to the next page that runs the tool, which for these front ends is
	// the app's next request: it knows the call by its id and does not run
	// it again. Default false: a /ws page that leaves may have run the tool,
	// and nobody will say.
	Handoff bool
	// Interrupts says the page comes with a user message sent instead of
	// an answer: a front end whose app cannot answer a call of an earlier
	// response once the user typed past it (the AI SDK's useChat posts
	// that answer with nothing once a new message follows the call's). As
	// the page attaches, the running turn's calls that wait on the app
	// (client calls no page without Handoff runs; approvals, when no such
	// page is there to give them) settle as cancelled, "the user sent a new
	// message instead of answering", and none is delivered to the page;
	// their turn does not prompt the model again. Its server work (a
	// worker's attempt, a sub-agent, the model writing) goes on, and the
	// message the page then sends waits for it. Default false.
	Interrupts bool
	// Message is the content of the user message an Interrupts page comes
	// with: one the session would refuse now (its length, the store
	// failing, the token budget spent) fails the Attach with that refusal,
	// in the step that would have stopped the calls: it stops nothing.
	Message string
	// Buffer is how many frames may wait on the stream between two Takes
	// (the replay aside); default DefaultPageBuffer (256). Past it the stream ends with
	// ErrSlowSubscriber: the page must reconnect and resume.
	Buffer int
	// Wake is called when frames arrive on an empty stream and when the
	// stream ends. It is called with the session's event lock held: it must
	// not block or call the Page's methods but Done and Err; typically it
	// starts a writer, which Takes until the stream is empty, then checks
	// Queued once more after it has marked itself stopped: a Wake that came
	// in between found it still running.
	// Nil: watch Ready instead.
	Wake func()
	// WriteNow, when set, replaces Wake for the session's events: it is
	// called once they are queued, outside the session's event lock, on
	// the goroutine that published them (the session's step, a model
	// turn's, a flusher's), which waits for it. A page may write its
	// frames there and spare a writer's wake-up, provided it never blocks
	// (a write the socket does not take at once is left to a writer).
	// Wake is still called when the stream starts (the replay) and ends.
	WriteNow func()
	// FrameBytes is the largest frame the page may send, if its transport
	// has a limit: session.opened tells the page, so it can refuse a frame
	// too large before sending it. Zero: not told.
	FrameBytes int64
}

// Page is one browser page attached to a session: its stream of frames, in
// order (session.opened, the replay, then every session event and the
// deliveries addressed to it), and its side of the conversation. Which page
// runs each client call (the lease) is decided by the session goroutine.
//
// Take, Ready, Done and Err may be called from any goroutine; Send, Answer,
// Cancel and Detach send the session a message.
type Page struct {
	id     string
	s      *Session
	ready  chan struct{} // one token: frames arrived or the stream ended
	wake   func()
	now    func() // AttachOptions.WriteNow
	limit  int
	limits PageLimits // told in session.opened

	// Guarded by the session's eventLog lock.
	queue  []Event
	pushed int // frames pushed since the last Take
	done   chan struct{}
	err    error

	// Owned by the session goroutine.
	tools    toolSet
	handoff  bool   // AttachOptions.Handoff
	active   uint64 // when the page last did something, in session activity ticks
	attached bool
}

// ID is the page's id, unique within its session.
func (p *Page) ID() string { return p.id }

// Ready receives a token after frames arrive on an empty stream and when the
// stream ends: then call Take.
func (p *Page) Ready() <-chan struct{} { return p.ready }

// Take returns the frames queued on the stream, in order, and keeps buf's
// memory (emptied) for the next ones: pass back what the previous Take
// returned once done with it, or nil.
func (p *Page) Take(buf []Event) []Event { return p.s.log.take(p, buf) }

// Queued is how many frames wait on the stream.
func (p *Page) Queued() int {
	p.s.log.mu.Lock()
	defer p.s.log.mu.Unlock()
	return len(p.queue)
}

// Done closes when the stream ends: Detach, the session ended
// (ErrSessionClosed; the frames queued before it, session.ended last, can
// still be taken), or the page fell behind (ErrSlowSubscriber; nothing more
// comes). After Done, call Detach so the session forgets the page.
func (p *Page) Done() <-chan struct{} { return p.done }

// Err says why Done closed: nil after Detach, ErrSessionClosed or
// ErrSlowSubscriber.
func (p *Page) Err() error {
	select {
	case <-p.done:
		return p.err // written before done closed, never after
	default:
		return nil
	}
}

// Send hands the session a user message from this page: the page holds the
// lease of that turn's client calls for the tools it declared.
func (p *Page) Send(ctx context.Context, content string) error {
	return p.s.send(ctx, p, Message{Content: content})
}

// SendOnce is Send for a message the page names with id (at most
// MaxMessageIDBytes): the session takes a message of that id once, however
// often the page sends it, as a page does with what it sent just before
// losing its connection, not knowing whether it arrived. Each copy gets a
// message.taken delivery once the session has stored the message, now or
// before; the message's events carry the id (Message.ID). The session
// remembers the ids of its last MessageIDMemory messages. Content may not
// be empty nor white space alone, but in a copy, which is not read.
func (p *Page) SendOnce(ctx context.Context, id, content string) error {
	if err := CheckMessageID(id); err != nil {
		return err
	}
	return p.s.send(ctx, p, Message{Content: content, ID: id})
}

// Answer settles a client attempt, as Session.Answer does; the answer may
// come from any page of the session.
func (p *Page) Answer(ctx context.Context, a Action) error {
	return p.s.do(ctx, func() error {
		p.s.touch(p)
		return p.s.answer(a, answerDefaults{}, true)
	})
}

// Cancel stops the running model turn and every open call, as
// Session.Cancel does.
func (p *Page) Cancel(ctx context.Context) error {
	return p.s.do(ctx, func() error {
		p.s.touch(p)
		p.s.cancelAll("cancelled by the user")
		return nil
	})
}

// Detach ends the page's stream and tells the session the page left: the
// attempts it held move to another page that declared their tools, with
// their deadlines unchanged, or wait for one.
func (p *Page) Detach() {
	p.endStream()
	p.tellLeft()
}

// tellLeft tells the session the page left (pageLeft runs once, however
// often it is told).
func (p *Page) tellLeft() {
	_ = p.s.post(context.Background(), func() { p.s.pageLeft(p) })
}

// endStream ends p's stream: no more frames are queued on it.
func (p *Page) endStream() {
	p.s.log.mu.Lock()
	defer p.s.log.mu.Unlock()
	p.s.log.drop(p, nil)
}

// signal wakes the page's reader; the eventLog lock is held.
func (p *Page) signal() {
	p.notify()
	if p.wake != nil {
		p.wake()
	}
}

// notify puts Ready's token; the eventLog lock is held.
func (p *Page) notify() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// anyClientTool in a page's set of tools is AttachOptions.AnyClientTool:
// no declared name is empty (checkTools), and the set is kept as it is
// for the pages that left, in the journal too.
const anyClientTool = ""

// toolSet is a page's set of tools: sorted, each name once. A page
// declares a few; a slice holds them in a sixth of a map's memory, and the
// journal's state takes it as it is. It is never changed once made.
type toolSet []string

// newToolSet makes the set of names.
func newToolSet(names []string) toolSet {
	set := append(make(toolSet, 0, len(names)), names...) // never nil: the journal writes []
	slices.Sort(set)
	return slices.Compact(set)
}

func (t toolSet) has(name string) bool {
	_, ok := slices.BinarySearch(t, name)
	return ok
}

// provides reports whether a page's set of tools has tool.
func provides(tools toolSet, tool string) bool {
	return tools.has(tool) || tools.has(anyClientTool)
}

// runs reports whether the page can run tool now.
func (p *Page) runs(tool string) bool {
	if !provides(p.tools, tool) {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// CheckTools checks a page's declaration against the limits Attach holds it
// to, so a caller can refuse it before opening a session for it.
func (e *Engine) CheckTools(tools []string) error {
	err := checkTools(tools, e.opts.MaxPageTools)
	return err
}

// CheckMessage checks a user message against the limit Send holds it to,
// so a caller can refuse it before opening a session for it.
func (e *Engine) CheckMessage(content string) error {
	if max := e.opts.MaxMessageBytes; len(content) > max {
		return fmt.Errorf("%w: the message is %d bytes, at most %d", ErrLimitExceeded, len(content), max)
	}
	return nil
}

// checkTools validates a page's declaration against the limits.
func checkTools(tools []string, max int) error {
	if len(tools) > max {
		return fmt.Errorf("%w: %d tools declared, at most %d per page", ErrLimitExceeded, len(tools), max)
	}
	for i, t := range tools {
		switch {
		case t == "":
			return badRequest("tools[%d] is empty", i)
		case len(t) > MaxToolNameBytes:
			return fmt.Errorf("%w: tools[%d] is %d bytes long, at most %d", ErrLimitExceeded, i, len(t), MaxToolNameBytes)
		case !utf8.ValidString(t):
			return badRequest("tools[%d] is not UTF-8", i)
		}
	}
	return nil
}

// Attach adds a page to the session and returns it, its stream primed with
// session.opened and the replay. Waiting client attempts whose tool it
// declared are delivered to it. It fails with ErrLimitExceeded for a
// declaration over the limits, and ErrSessionClosed once the session ended.
func (s *Session) Attach(ctx context.Context, o AttachOptions) (*Page, error) {
	if err := checkTools(o.Tools, s.e.opts.MaxPageTools); err != nil {
		return nil, err
	}
	names := o.Tools
	if o.AnyClientTool {
		names = append(slices.Clip(names), anyClientTool)
	}
	tools := newToolSet(names)
	if o.Buffer <= 0 {
		o.Buffer = DefaultPageBuffer
	}
	p := &Page{
		id: "page_" + s.e.opts.NewID(), s: s, wake: o.Wake, now: o.WriteNow, limit: o.Buffer, tools: tools, handoff: o.Handoff,
		limits: PageLimits{FrameBytes: o.FrameBytes, MessageBytes: s.e.opts.MaxMessageBytes},
		ready:  make(chan struct{}, 1), done: make(chan struct{}),
	}
	if o.After < 0 {
		o.After = 0
	}
	// The events the session no longer keeps in memory are read here, on
	// the caller's goroutine, not the session's, while the session keeps
	// the ones after them.
	first, pn, err := s.log.pinFor(o.After, o.Epoch)
	if err != nil {
		return nil, err // ended, unloaded, or the page's copy is ahead: nothing to read
	}
	defer s.log.unpin(pn)
	var older []Event
	if o.After < first-1 {
		if older, err = s.olderEvents(ctx, o.After+1, first-1); err != nil {
			return nil, err
		}
	}
	if err := s.do(ctx, func() error { return s.attach(p, o, older, pn) }); err != nil {
		// ctx may have ended with the attach queued, not yet run: if it
		// runs, the page leaves again, as nobody will read or detach it.
		_ = s.post(context.Background(), func() {
			if p.attached {
				p.endStream()
				s.pageLeft(p)
			}
		})
		return nil, err
	}
	return p, nil
}

// attach adds p to the session, its replay the events after o.After,
// older first (Attach); on the session goroutine.
func (s *Session) attach(p *Page, o AttachOptions, older []Event, pn *pin) error {
	if o.Interrupts {
		if err := s.refusal(Message{Content: o.Message}); err != nil {
			return err
		}
	}
	if err := s.log.attach(p, o.After, older, pn, s.e.opts.Clock.Now()); err != nil {
		return err
	}
	p.attached = true
	s.pages = append(s.pages, p)
	s.touch(p)
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	s.logger.Info("page attached", "page", p.id, "tools", len(p.tools), "pages", len(s.pages), "after", o.After)
	if o.Interrupts {
		// After the page joined the log: the page gets the outcomes.
		s.typedPast()
	}
	for _, c := range s.allOpenCalls() {
		if c.handler == HandlerClient && c.holder == nil && c.running() && p.runs(c.name) {
			c.run.lease(c, p)
		}
	}
	return nil
}

// sentInstead is why a page that Interrupts stops a turn.
const sentInstead = "the user sent a new message instead of answering"

// typedPast settles as cancelled the calls of the running turn that wait
// on the app a new message typed past (Interrupts): its client calls that
// no /ws page runs (delivered to an earlier response, whose page may not
// have left yet, or waiting for one), and, with no /ws page there to
// answer, those that ask the user's approval. Their batch does not prompt
// the model again: the new message does, once the turn's server work (a worker's attempt, a
// sub-agent), which goes on, is done. A turn whose model writes has no
// such calls yet.
func (s *Session) typedPast() {
	// A /ws page (no Handoff) shows an approval and answers it.
	approver := slices.ContainsFunc(s.pages, func(q *Page) bool { return !q.handoff })
	for _, c := range s.openCalls() {
		// A front end's page (Handoff) that holds it is the app's: one
		// leaving, or another tab's response.
		waits := c.handler == HandlerClient && (c.holder == nil || c.holder.handoff) && c.child == nil
		asks := c.approving && !approver
		if !waits && !asks {
			continue
		}
		s.cancel(c, sentInstead)
	}
}

// touch records that p did something: the most recently active page runs
// the calls the turn's own page cannot.
func (s *Session) touch(p *Page) {
	s.activity++
	p.active = s.activity
}

// pageLeft forgets a page and moves the attempts it held.
func (s *Session) pageLeft(p *Page) {
	if !p.attached {
		return
	}
	p.attached = false
	for i, q := range s.pages {
		if q == p {
			s.pages = append(s.pages[:i], s.pages[i+1:]...)
			break
		}
	}
	if s.turnPage == p {
		s.turnPage = nil
	}
	if len(p.tools) > 0 { // a page that runs no tool would only push out those that do
		s.departed = append(s.departed, p.tools)
		if len(s.departed) > maxDeparted {
			s.departed = s.departed[1:]
		}
	}
	s.logger.Info("page detached", "page", p.id, "pages", len(s.pages))
	closing := s.e.closing.Load() // the page did not leave: the process stops (Engine.Closing)
	for _, c := range s.allOpenCalls() {
		if c.holder == p {
			if c.running() && c.notTwice && c.reached() && !p.handoff && !closing {
				c.run.settleUnknown(c, fmt.Sprintf("the page running %s closed before answering", c.name), "")
				continue
			}
			c.holder = nil
			c.holderGone = closing
			if c.running() && !closing {
				next := s.holderFor(c.name, nil)
				if next != nil {
					// Moved; with no page to take it, it waits, and the
					// page that takes it later counts no move.
					s.e.opts.Metrics.LeaseMoved()
				}
				c.run.lease(c, next)
			}
		}
	}
}

// holderFor picks the page to run a client attempt of tool: the page that
// sent the turn's message when it declared the tool, else the most recently
// active page that did; a page other than avoid when there is one. Nil: no
// attached page runs the tool. A sub-agent's calls go to its session's pages.
func (s *Session) holderFor(tool string, avoid *Page) *Page {
	s = s.top()
	pick := func(skip *Page) *Page {
		if tp := s.turnPage; tp != nil && tp != skip && tp.runs(tool) {
			return tp
		}
		var best *Page
		for _, p := range s.pages {
			if p != skip && p.runs(tool) && (best == nil || p.active > best.active) {
				best = p
			}
		}
		return best
	}
	if avoid != nil {
		if p := pick(avoid); p != nil {
			return p
		}
	}
	return pick(nil)
}

// declared reports whether a page of the session provides tool: one attached
// now, or one of the last to leave (a reload must not fail a call).
func (s *Session) declared(tool string) bool {
	s = s.top()
	for _, p := range s.pages {
		if provides(p.tools, tool) {
			return true
		}
	}
	for _, tools := range s.departed {
		if provides(tools, tool) {
			return true
		}
	}
	return false
}

// lease gives c's running attempt to holder (nil: it waits for a page),
// tells every page, and delivers the attempt to holder with its deadline
// unchanged.
func (s *Session) lease(c *call, holder *Page) {
	c.holder, c.holderGone = holder, false
	ev := ToolLeasedEvent{ID: c.id, Name: c.name, Attempt: c.attempt}
	if holder != nil {
		ev.Page = holder.id
	}
	s.publish(EventToolLeased, ev)
	if holder == nil {
		s.logger.Info("client call waiting for a page", "call", c.id, "tool", c.name, "attempt", c.attempt)
		return
	}
	s.deliverCall(c)
}

// deliverCall puts the current attempt of c on its holder's stream.
func (s *Session) deliverCall(c *call) {
	frame, err := EncodeFrame(FrameToolCall, ClientCall{
		ID: c.id, Name: c.name, Arguments: c.args, Input: c.input,
		Attempt: c.attempt, Attempts: c.spec.attempts, Deadline: FormatDeadline(c.deadline), Proposed: c.proposedFor(c.attempt),
		Parent: s.parentID(),
	})
	if err != nil {
		s.logger.Error("failed to encode tool.call", "call", c.id, "err", err)
		return
	}
	if !s.log.deliver(c.holder, FrameToolCall, frame) {
		// The page fell behind and was dropped: its Detach moves the attempt.
		s.logger.Info("client call not delivered: the page is gone", "call", c.id, "page", c.holder.id)
		return
	}
	c.delivered = s.e.opts.Clock.Now()
	c.attemptDelivered(c.holder.id)
	if s.logs(slog.LevelDebug) {
		s.logger.Debug("client call delivered", "call", c.id, "attempt", c.attempt, "page", c.holder.id)
	}
}

// armUnload unloads the session once it has had no page and no work for
// Options.Unload: it leaves memory, and the journal keeps it until a page
// comes back (Engine.Load) or retention deletes it.
func (s *Session) armUnload() {
	s.idleSince = s.e.opts.Clock.Now()
	var t clock.Timer
	t = s.e.opts.Clock.AfterFunc(s.e.opts.Unload, func() {
		_ = s.post(context.Background(), func() {
			if s.idleTimer != t {
				// Stopped since (a page came or work began), its post
				// already on its way; another may be armed.
				return
			}
			s.idleTimer = nil
			if s.unloadIfIdle() {
				s.logger.Info("session unloaded: no page and no work", "after", s.e.opts.Unload)
			}
		})
	})
	s.idleTimer = t
}

// unloadIfIdle takes the session out of memory at the end of this step if
// it has no page and no work, and reports whether it does: when Unload
// has passed (armUnload), or at once when LoadFor loaded it for a caller
// it refused.
func (s *Session) unloadIfIdle() bool {
	if len(s.pages) > 0 || s.busy() || s.ending {
		return false
	}
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	s.unloading = true
	return true
}

// declaredSets appends to out[:0] the tools of the attached pages and of
// the last to leave, for the journal: after a restart they are the pages
// that left. A page that runs no tool is not among them, as it is not
// among those that left (pageLeft): it would push out those that do, and
// its coming and going would each write a step.
func (s *Session) declaredSets(out [][]string) [][]string {
	out = out[:0]
	for _, tools := range s.departed {
		out = append(out, tools)
	}
	for _, p := range s.pages {
		if len(p.tools) > 0 {
			out = append(out, p.tools)
		}
	}
	if len(out) > maxDeparted {
		n := copy(out, out[len(out)-maxDeparted:])
		clear(out[n:])
		out = out[:n]
	}
	return out
}

// Frames yields the stream's frames in order, waiting for more, until the
// stream ends (Err says why) or ctx is done. It suits Go readers that do
// not need Wake: tests, tools, an observer of a session.
func (p *Page) Frames(ctx context.Context) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		var frames []Event
		for {
			frames = p.Take(frames)
			for _, ev := range frames {
				if !yield(ev) {
					return
				}
			}
			if len(frames) == 0 {
				select {
				case <-p.done:
					// Frames queued before the end are still taken once more.
					if frames = p.Take(frames); len(frames) == 0 {
						return
					}
					for _, ev := range frames {
						if !yield(ev) {
							return
						}
					}
					return
				default:
				}
				select {
				case <-p.ready:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}
