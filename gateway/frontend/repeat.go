package frontend

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"

	"github.com/clienttools/gateway/engine"
)

// Sent is what a request's new user message is to its session: one the
// session took already, the request sent again with the same messages (an
// HTTP retry, a reload that posts what the app saved, a second tab, a run
// again after a restart), or a new one.
type Sent struct {
	// Took: the session took a message of this id.
	Took bool
	// Seq is its event's seq, when the session keeps that event in memory:
	// the request's response is that message's, replayed from it. 0: it
	// waits for the running turn, or is older than what the session keeps;
	// the response goes on from where the session is.
	Seq int64
}

// FindSent looks for the user message of id, as the app sent it with
// content, among those the session took. One taken with other content
// is an edit, refused (400): the session's transcript cannot be
// rewritten. An id SendOnce would refuse (empty, too long) is no
// message's: the request's is new.
func FindSent(ctx context.Context, sess *engine.Session, id, content string) (Sent, error) {
	if engine.CheckMessageID(id) != nil {
		return Sent{}, nil
	}
	took, waiting, err := sess.Took(ctx, id)
	if err != nil || !took {
		return Sent{}, err
	}
	if waiting {
		// No event yet: its response goes on from where the session is,
		// with no read of the journal to find what is not there.
		return Sent{Took: true}, nil
	}
	var seq int64
	var edited error
	peek, _, err := Peek(ctx, sess, func(events []engine.Event) bool {
		var found bool
		seq, found, edited = sentAmong(events, id, content)
		return found
	})
	if peek != nil {
		peek.Detach()
	}
	if err == nil {
		err = edited
	}
	return Sent{Took: true, Seq: seq}, err
}

// Peek reads the session's events on a page that runs no tool, so that no
// call is delivered to it: those it keeps in memory, where what a front end
// looks for nearly always is, then, when found says it is not among them,
// the chat's from its start (read from the store). It returns the page
// whose events found it, still attached, for the caller to detach, and
// those events; no page when neither read found it.
func Peek(ctx context.Context, sess *engine.Session, found func([]engine.Event) bool) (*engine.Page, []engine.Event, error) {
	for _, after := range []int64{max(sess.KeptFrom()-1, 0), 0} {
		peek, err := sess.Attach(ctx, engine.AttachOptions{After: after, Handoff: true})
		if err != nil {
			return nil, nil, err
		}
		if events := peek.Take(nil); found(events) {
			return peek, events, nil
		}
		peek.Detach()
		if after == 0 {
			break
		}
	}
	return nil, nil, nil
}

// Sending is a response's new user message, from its send until the
// session takes it: message.taken for its id. A session.idle before then
// ends what ran as it was sent (another tab's turn, the turn the request's
// own answers began), not the message's answer: the response waits on.
// The zero value has sent nothing.
type Sending struct {
	id      string
	waiting bool
}

// sender is what sends a user message: an *engine.Page.
type sender interface {
	SendOnce(ctx context.Context, id, content string) error
}

// Send sends a front end's user message from page, once by its id
// (Page.SendOnce), so that a request sent again is one message. An id the
// engine does not take (empty, too long) is replaced by one of the
// gateway's, which message.taken names all the same (a copy sent again is
// then a second message, as a message without an id would be).
func (s *Sending) Send(ctx context.Context, page sender, id, content string) error {
	if engine.CheckMessageID(id) != nil {
		id = "gateway-" + rand.Text() // not gw<seq>, the AG-UI ids of the gateway's events
	}
	err := page.SendOnce(ctx, id, content)
	s.id, s.waiting = id, err == nil
	return err
}

// See notes ev, one of every frame of the response's page in order.
func (s *Sending) See(ev engine.Event) {
	if !s.waiting || ev.Type != engine.FrameMessageTaken {
		return
	}
	var f engine.MessageTakenFrame
	s.waiting = json.Unmarshal(ev.Frame, &f) != nil || f.ID != s.id
}

// Waiting reports whether the message is sent and the session has not
// taken it yet.
func (s *Sending) Waiting() bool { return s.waiting }

// sentAmong finds the event of the user message of id among events, and
// refuses it when it was sent with other content.
func sentAmong(events []engine.Event, id, content string) (seq int64, found bool, err error) {
	for _, ev := range slices.Backward(events) {
		if ev.Type != engine.EventMessage {
			continue
		}
		var e struct {
			Parent  string         `json:"parent"`
			Message engine.Message `json:"message"`
		}
		if json.Unmarshal(ev.Frame, &e) != nil || e.Parent != "" || e.Message.Role != "user" || e.Message.ID != id {
			continue
		}
		if e.Message.Content != content {
			return 0, true, BadRequest("message %.64q was sent before with other text: an edited message cannot replace the one the chat holds; send it as a new message", id)
		}
		return ev.Seq, true, nil
	}
	return 0, false, nil
}
