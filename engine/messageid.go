package engine

import (
	"context"
	"slices"

	"github.com/clienttools/gateway/engine/model"
)

// MessageIDMemory is how many of its last user messages' ids a session
// remembers, to take a message sent again only once (Page.SendOnce). A page
// sends again only what it sent just before losing its connection: a few
// messages at most, so a copy comes long before 64 newer ones.
const MessageIDMemory = 64

// MaxMessageIDBytes bounds a message's id: the SDK's are 22 bytes.
const MaxMessageIDBytes = 128

// CheckMessageID refuses an empty id or one over MaxMessageIDBytes
// (ErrBadRequest).
func CheckMessageID(id string) error {
	switch {
	case id == "":
		return badRequest("the message's \"id\" is empty")
	case len(id) > MaxMessageIDBytes:
		return badRequest("the message's \"id\" is %d bytes, at most %d", len(id), MaxMessageIDBytes)
	}
	return nil
}

// MessageTakenFrame tells the page that sent a message with an id that the
// session has stored it (now, or when an earlier copy came): it is not
// needed again. A delivery: no seq, to that page only.
type MessageTakenFrame struct {
	ID string `json:"id"`
}

// Took reports whether the session took a user message of id (one of its
// last MessageIDMemory), as SendOnce would find it: an HTTP front end's
// request sent again with the same messages; and whether that message
// still waits for the running turn (it is no event yet).
func (s *Session) Took(ctx context.Context, id string) (took, waiting bool, err error) {
	err = s.do(ctx, func() error {
		took = s.tookMessage(id)
		waiting = took && (slices.ContainsFunc(s.waiting, func(w waitingMessage) bool { return w.msg.ID == id }) ||
			slices.ContainsFunc(s.queue, func(q queued) bool {
				t, ok := q.trigger.(UserMessage)
				return ok && t.Message.ID == id
			}))
		return nil
	})
	return took, waiting, err
}

// tookMessage reports whether the session took a message of id already.
func (s *Session) tookMessage(id string) bool { return slices.Contains(s.messageIDs, id) }

// takenAgain confirms to page a copy of a message the session took
// already (its page sent it again, not knowing it arrived), and reports
// whether the message of id is one. An empty id is no message's.
func (s *Session) takenAgain(page *Page, id string) bool {
	if id == "" || !s.tookMessage(id) {
		return false
	}
	s.confirmMessage(page, id)
	return true
}

// rememberMessage adds id to the ids taken, forgetting the oldest past
// MessageIDMemory.
func (s *Session) rememberMessage(id string) {
	if len(s.messageIDs) == MessageIDMemory {
		s.messageIDs = slices.Delete(s.messageIDs, 0, 1)
	}
	s.messageIDs = append(s.messageIDs, id)
}

// confirmMessage tells page that the message of id is the session's: the
// delivery goes with the step, so the page reads it once the step is
// stored. A page gone meanwhile sends the message again, and is told then.
func (s *Session) confirmMessage(page *Page, id string) {
	if page == nil {
		return
	}
	s.log.deliver(page, FrameMessageTaken, messageTaken(id))
}

// messageTaken is the message.taken frame for id: MessageTakenFrame,
// written by hand (one every message), as EncodeFrame writes it.
func messageTaken(id string) []byte {
	frame := make([]byte, 0, len(`{"type":"message.taken","id":""}`)+len(id)+8)
	return append(AppendJSONString(append(frame, `{"type":"message.taken","id":`...), id), '}')
}

// restoreMessageIDs remembers the ids of the user messages a rebuilt
// session took, newest last: those of its transcript, then those of the
// queued and waiting ones that have not joined it yet.
func (s *Session) restoreMessageIDs() {
	var ids []string
	for _, m := range s.transcript {
		if m.Role == model.RoleUser && m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	for _, q := range s.queue {
		if t, ok := q.trigger.(UserMessage); ok && t.Message.ID != "" {
			ids = append(ids, t.Message.ID)
		}
	}
	for _, w := range s.waiting {
		if w.msg.ID != "" {
			ids = append(ids, w.msg.ID)
		}
	}
	for _, id := range ids[max(0, len(ids)-MessageIDMemory):] {
		if !s.tookMessage(id) {
			s.rememberMessage(id)
		}
	}
}
