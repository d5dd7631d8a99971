package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/clock"
)

// TypeToolProgress is the browser's frame, and the event pages see, when a
// running attempt reports progress.
const TypeToolProgress = "tool.progress"

// ToolProgress is an attempt's report that it is still working: a long
// browser tool (an upload, a form the user fills) or worker tool. Each
// moves the attempt's deadline to its timeout from when it came, never
// past the policy's maxTimeout from the attempt's start; at most one each
// progressEvery is stored and sent, the latest.
type ToolProgress struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	// Progress and Total say how far along, in any unit (Progress of
	// Total); both optional.
	Progress *float64 `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// ToolProgressEvent is tool.progress as pages see it, with the attempt's
// deadline after the report.
type ToolProgressEvent struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Attempt  int      `json:"attempt"`
	Progress *float64 `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
	Deadline string   `json:"deadline"`
}

// EventToolProgress is the tool.progress event.
const EventToolProgress = TypeToolProgress

// maxProgressMessage bounds a progress message: it is for a status line.
const maxProgressMessage = 500

// check refuses a report no page should send.
func (p ToolProgress) check() error {
	for _, n := range []struct {
		name string
		v    *float64
	}{{"progress", p.Progress}, {"total", p.Total}} {
		if n.v != nil && (math.IsNaN(*n.v) || math.IsInf(*n.v, 0) || *n.v < 0) {
			return badRequest("tool.progress %q is %v: it must be finite and not negative", n.name, *n.v)
		}
	}
	if len(p.Message) > maxProgressMessage {
		return fmt.Errorf("%w: tool.progress message is %d bytes, at most %d", ErrLimitExceeded, len(p.Message), maxProgressMessage)
	}
	return nil
}

// Progress reports progress of a client attempt this page runs, as
// Page.Answer answers it: ErrUnknownCall, ErrStaleAttempt or ErrSettled
// when it cannot count (it is then ignored).
func (p *Page) Progress(ctx context.Context, pr ToolProgress) error {
	if err := pr.check(); err != nil {
		return err
	}
	return p.s.do(ctx, func() error {
		p.s.touch(p)
		return p.s.progress(pr, HandlerClient)
	})
}

// progressKey marks a worker attempt's context with its call.
type progressKey struct{}

type progressTarget struct {
	s       *Session
	id      string
	attempt int
}

// attemptCtx is the context a worker's Decide gets with a tool.execute:
// it says which attempt it runs (ReportProgress) and, as the decide
// context does, which session decides (Session.End).
type attemptCtx struct {
	context.Context
	target progressTarget
}

func (c *attemptCtx) Value(key any) any {
	switch key.(type) {
	case progressKey:
		return c.target
	case decidingKey:
		return c.target.s.top() // a sub-agent's Decide is its session's
	}
	return c.Context.Value(key)
}

// ReportProgress reports progress of the worker attempt whose context ctx
// is (the one Decide got with a tool.execute trigger): a Go worker's long
// tool keeps its attempt alive with it. It fails outside such a context.
func ReportProgress(ctx context.Context, progress, total float64, message string) error {
	t, ok := ctx.Value(progressKey{}).(progressTarget)
	if !ok {
		return errors.New("engine: ReportProgress needs the context of a tool.execute")
	}
	pr := ToolProgress{ID: t.id, Attempt: t.attempt, Message: message}
	if progress != 0 || total != 0 {
		pr.Progress, pr.Total = &progress, &total
	}
	if err := pr.check(); err != nil {
		return err
	}
	return t.s.do(ctx, func() error { return t.s.progress(pr, HandlerWorker) })
}

// progress takes a report for the current attempt of a call of handler.
func (s *Session) progress(pr ToolProgress, handler Handler) error {
	c, ok := s.lookup(pr.ID)
	switch {
	case ok && c.run != s:
		return c.run.progress(pr, handler) // a sub-agent's call
	case !ok || c.handler != handler:
		return fmt.Errorf("%w: %s", ErrUnknownCall, clip.Quote(pr.ID, maxQuotedID))
	case c.settled:
		return fmt.Errorf("%w: %q attempt %d (the call has settled)", ErrStaleAttempt, pr.ID, pr.Attempt)
	case pr.Attempt != c.attempt || c.backingOff:
		return staleAttempt(pr.ID, pr.Attempt, c)
	}
	now := s.e.opts.Clock.Now()
	w := c.progress
	if w == nil {
		w = &progressWindow{}
		c.progress = w
	}
	if w.at.IsZero() || now.Sub(w.at) >= progressEvery {
		s.applyProgress(c, pr, now)
		return nil
	}
	// Within the window: the latest report waits for its end, or, when it
	// moves the deadline and the deadline comes first, until just before.
	w.next, w.nextAt, w.waiting = pr, now, true
	s.waitProgress(c, now)
	return nil
}

// waitProgress has c's waiting report taken when its window ends, or just
// before the deadline it moves: at once when that is now.
func (s *Session) waitProgress(c *call, now time.Time) {
	w := c.progress
	due := w.at.Add(progressEvery)
	if progressDeadline(c, w.nextAt).After(c.deadline) && c.deadline.Before(due.Add(progressGuard)) {
		due = c.deadline.Add(-progressGuard)
	}
	if !due.After(now) {
		s.applyProgress(c, w.next, w.nextAt)
		return
	}
	if w.timer == nil || due.Before(w.due) {
		w.stop()
		id, attempt := c.id, c.attempt
		w.due = due
		w.timer = s.e.opts.Clock.AfterFunc(due.Sub(now), func() {
			_ = s.post(context.Background(), func() { s.flushProgress(id, attempt) })
		})
	}
}

// progressEvery is how often an attempt's reports are stored and sent at
// most (but for a timeout under progressEvery+progressGuard, whose
// reports count before the deadline they move): a page that reports every
// chunk of an upload, or a flood, grows the journal by four events a
// second, not one a report. progressGuard: how long before the deadline a
// report that moves it counts.
const (
	progressEvery = 250 * time.Millisecond
	progressGuard = 25 * time.Millisecond
)

// progressWindow coalesces an attempt's reports: the first of a window is
// taken at once, the latest of the others when it ends (flushProgress).
type progressWindow struct {
	at      time.Time    // when the last report was taken
	next    ToolProgress // the latest report since, waiting
	nextAt  time.Time    // when it came: its deadline counts from then
	waiting bool
	timer   clock.Timer // takes next at due; nil: none armed
	due     time.Time
}

// progressDeadline is the deadline a report that came at arrived gives
// c's attempt: its timeout from then, never past maxTimeout from the
// attempt's start.
func progressDeadline(c *call, arrived time.Time) time.Time {
	deadline := arrived.Add(c.spec.timeout)
	if limit := c.attemptStarted.Add(c.spec.maxTimeout); !c.attemptStarted.IsZero() && deadline.After(limit) {
		deadline = limit
	}
	return deadline
}

// stop ends w's window, its waiting report dropped (the attempt ended).
func (w *progressWindow) stop() {
	if w != nil && w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// flushProgress takes the report that waited for its window's end, unless
// the attempt ended meanwhile.
func (s *Session) flushProgress(id string, attempt int) {
	c, ok := s.lookup(id)
	if !ok || c.run != s || c.settled || c.attempt != attempt || c.backingOff || c.progress == nil {
		return
	}
	w := c.progress
	w.timer = nil
	if w.waiting {
		// A report that came as the window ended, before this step (its
		// inbox full of reports), took a new window: the waiting one
		// waits for its end, not out at once beside it.
		s.waitProgress(c, s.e.opts.Clock.Now())
	}
}

// applyProgress takes report pr, which came at arrived: the attempt's
// deadline moves, and pages see it.
func (s *Session) applyProgress(c *call, pr ToolProgress, arrived time.Time) {
	now := s.e.opts.Clock.Now()
	c.progress.at, c.progress.waiting = now, false
	if deadline := progressDeadline(c, arrived); deadline.After(c.deadline) {
		c.deadline = deadline
		if c.timer != nil {
			c.timer.Stop()
		}
		s.armTimeout(c, deadline.Sub(now))
	}
	if c.attemptSpan != nil {
		c.attemptSpan.AddEvent("progress")
	}
	s.publish(EventToolProgress, ToolProgressEvent{ID: c.id, Name: c.name, Attempt: c.attempt,
		Progress: pr.Progress, Total: pr.Total, Message: pr.Message, Deadline: FormatDeadline(c.deadline)})
}
