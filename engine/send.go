package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clienttools/gateway/engine/model"
)

// Send hands the session a user message that no page sent: the turn's
// client calls go to the most recently active page (Page.Send says which
// page sent it). It returns once the step that takes the message is
// committed, or with why it was not taken: ErrLimitExceeded (too many
// waiting, too long), ErrUnloaded (the session left memory first, or
// another node's journal refused the step: send it there again). Called
// from the worker's Decide with its context, it only asks (as End does):
// the step that takes it runs after Decide returns, and a refusal is
// logged.
func (s *Session) Send(ctx context.Context, content string) error {
	return s.send(ctx, nil, Message{Content: content})
}

// send takes msg from page from (nil: no page).
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
	take := func() error {
		if s.takenAgain(from, msg.ID) {
			return nil
		}
		if err := s.roomToWait(msg); err != nil {
			return err
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
		return nil
	}
	if root := s.top(); ctx.Value(inStepKey{}) == root {
		// From the worker's Decide in a step: taken by that step once
		// Decide returns, so its sender cannot wait for it, nor hear why
		// it was not taken: the log says. Not posted: the inbox may be
		// full, and its next message waits for this step.
		root.decidedMu.Lock()
		root.decidedSends = append(root.decidedSends, func() {
			if err := take(); err != nil {
				s.logger.Warn("a message sent from the worker's Decide was not taken", "err", err)
			}
		})
		root.decidedMu.Unlock()
		return nil
	}
	// do, not post: the caller learns whether the session took the
	// message. One posted to a session that was leaving (its lease lost, a
	// step fenced) never ran, and its sender heard nothing.
	return s.do(ctx, take)
}

// refusal says why the session takes no new message msg now: its length,
// the store failing, the messages already waiting, the token budget.
func (s *Session) refusal(msg Message) error {
	if msg.ID != "" && strings.TrimSpace(msg.Content) == "" {
		// A page's message (SendOnce): refused here, not where its frame
		// is read, so that an empty copy of one the session took is
		// confirmed, as any copy is, whatever its content.
		return badRequest("message \"content\" is empty")
	}
	if err := s.e.CheckMessage(msg.Content); err != nil {
		return err
	}
	if err := s.log.failing(); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	if why := s.budgetUsed.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrBudgetSpent, *why)
	}
	return nil
}

// takeDecidedSends takes the messages the worker's Decide sent during this
// step, on the session goroutine, once that Decide has returned.
func (s *Session) takeDecidedSends() {
	for _, take := range s.popDecidedSends() {
		take()
	}
}

// popDecidedSends returns the messages the worker's Decide sent during this
// step, and forgets them.
func (s *Session) popDecidedSends() []func() {
	s.decidedMu.Lock()
	defer s.decidedMu.Unlock()
	sends := s.decidedSends
	s.decidedSends = nil
	return sends
}

// dropDecidedSends forgets the messages the worker's Decide sent during
// this step, the session's lease lost meanwhile: they are not taken here,
// and the log says so.
func (s *Session) dropDecidedSends() {
	if n := len(s.popDecidedSends()); n > 0 {
		s.logger.Warn("messages sent from the worker's Decide were not taken: another node runs the session now", "messages", n)
	}
}

// maxWaitingMessages bounds the messages waiting for a running turn, as
// MaxMessageBytes bounds their bytes: each rides in every step's state
// until it joins the transcript.
const maxWaitingMessages = 64

// roomToWait refuses msg when the messages waiting for the running turn
// are already as many, or would with it hold more bytes (contents and
// ids), than a session keeps waiting. It runs in the step that adds msg:
// checked before, the messages a page's reader hands over together would
// each pass against the same total.
func (s *Session) roomToWait(msg Message) error {
	if len(s.waiting) >= maxWaitingMessages {
		return fmt.Errorf("%w: %d messages wait for the running turn to end, as many as a session keeps waiting: send this one once the turn ends", ErrLimitExceeded, len(s.waiting))
	}
	// Their contents and ids: each rides in every step's state until it
	// joins the transcript, and a state must fit the store's message.
	var waiting int64
	for _, w := range s.waiting {
		waiting += waitingSize(w.msg)
	}
	if waiting > 0 && waiting+waitingSize(msg) > int64(s.e.opts.MaxMessageBytes) {
		return fmt.Errorf("%w: the messages waiting for the running turn to end hold %d bytes, and with this one would pass %d (the longest message): send it once the turn ends", ErrLimitExceeded, waiting, s.e.opts.MaxMessageBytes)
	}
	return nil
}

// waitingSize is what a waiting message costs each step's state.
func waitingSize(m Message) int64 { return int64(len(m.Content) + len(m.ID)) }

// addWaiting puts w after the messages waiting for the running turn.
func (s *Session) addWaiting(w waitingMessage) {
	s.waiting = append(s.waiting, w)
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
