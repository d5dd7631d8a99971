package frontend

import (
	"context"
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
	// Among the events the session keeps, then, when not there, from the
	// chat's start: read on a page that runs no tool, so that no call is
	// delivered to it.
	for _, after := range []int64{max(sess.KeptFrom()-1, 0), 0} {
		peek, err := sess.Attach(ctx, engine.AttachOptions{After: after, Handoff: true})
		if err != nil {
			return Sent{}, err
		}
		events := peek.Take(nil)
		peek.Detach()
		if seq, found, err := sentAmong(events, id, content); found || err != nil {
			return Sent{Took: true, Seq: seq}, err
		}
		if after == 0 {
			break
		}
	}
	return Sent{Took: true}, nil
}

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
