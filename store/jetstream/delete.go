package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Delete implements engine.Store. It deletes the session's messages from
// the journal's stream (deleteJournal) and purges its summary (its key,
// whoever owns it): nothing of the session stays, where the bucket's own
// Purge would leave a marker per key for ever.
func (s *Store) Delete(ctx context.Context, session string) error {
	if !validID(session) {
		return nil
	}
	if err := s.deleteJournal(ctx, session); err != nil {
		return fmt.Errorf("failed to delete session %s's journal: %w", session, err)
	}
	s.forgetSession(session)
	if err := s.summaryStream.Purge(ctx, jetstream.WithPurgeSubject(summarySubject+"*."+session)); err != nil {
		return fmt.Errorf("failed to delete session %s's summary: %w", session, err)
	}
	return nil
}

// deleteJournal deletes session's journal. A journal that spans far
// (links.go) is deleted message by message, found by their links
// (deleteByLinks). What the links do not reach (an append after the last
// message was read, a message published by hand without its link, a
// message a replica behind has not got, a walk out of its time), and a
// journal that spans less, are purged; then the purge has few blocks or
// none to read.
func (s *Store) deleteJournal(ctx context.Context, session string) error {
	subj := subject(session)
	walk, cancel := walkContext(ctx)
	defer cancel()
	s.deleteByLinks(walk, session)
	return s.journal.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

// deleteByLinks deletes session's messages one by one, when it spans far
// (farFirst): its first, then the others from its last, by their links.
// It never deletes a message of another subject: a link that names one
// ends the walk. Whatever ends it (a read or a deletion that fails, the
// server refusing deletions), the purge after it deletes the rest, and
// says what failed.
//
// The first goes first so that a deletion cut short (its time, a purge
// that fails, the process killed) leaves no chat to load: what is left
// starts at a message that links to a deleted one, which Load takes for
// a deletion begun, and finishes. Cut short from the last back, it left
// the chat's first steps, a whole journal of fewer steps, which a load
// read as the chat and the chat went on from.
func (s *Store) deleteByLinks(ctx context.Context, session string) {
	if s.deleteByLinksDenied.Load() {
		return
	}
	msg, err := s.lastMsg(ctx, session)
	if err != nil {
		return
	}
	subj := subject(session)
	first := s.farFirst(ctx, subj, 1, nil, msg)
	if first == nil || !s.deleteMsg(ctx, first.Sequence) {
		return // the purge: it reads the few blocks a near journal spans
	}
	for ok := true; ok && msg.Sequence != first.Sequence; msg, ok = s.before(ctx, subj, msg, first) {
		if !s.deleteMsg(ctx, msg.Sequence) {
			return
		}
	}
}

// deleteMsg deletes the journal's message at seq, and reports whether it
// is gone. A refusal of the server's is said once, and deleteByLinks
// leaves journals to the purge from then on.
func (s *Store) deleteMsg(ctx context.Context, seq uint64) bool {
	_, err := request(ctx, &s.denials, "STREAM.MSG.DELETE."+JournalStream, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.journal.DeleteMsg(ctx, seq)
	})
	if errors.Is(err, errDenied) && !s.deleteByLinksDenied.Swap(true) {
		s.opts.Logger.Warn("the NATS user may not delete the journal's messages one by one: a chat whose journal spans much of the stream is purged whole, which holds every other chat's steps while the server reads the blocks it spans (deploy.md, The NATS user)", "err", err)
	}
	return err == nil || errors.Is(err, jetstream.ErrMsgNotFound)
}
