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
// (links.go) is deleted message by message, found from its last by their
// links (deleteByLinks). What the links do not reach
// (an append after the last message was read, a journal a backup's tail
// copied without its links, a message a replica behind has not got), and
// a journal that spans less, are purged; then the purge has few blocks or
// none to read.
func (s *Store) deleteJournal(ctx context.Context, session string) error {
	subj := subject(session)
	walk, cancel := walkContext(ctx)
	defer cancel()
	s.deleteByLinks(walk, subj)
	return s.journal.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

// deleteByLinks deletes subj's messages one by one from its last, by
// their links, when it spans far (farFirst). It never deletes a message of
// another subject: a link that names one ends the walk. Whatever ends it
// (a read or a deletion that fails, the server refusing deletions), the
// purge after it deletes the rest, and says what failed.
func (s *Store) deleteByLinks(ctx context.Context, subj string) {
	if s.deleteByLinksDenied.Load() {
		return
	}
	msg, err := s.journal.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return
	}
	first := s.farFirst(ctx, subj, 1, msg)
	if first == nil {
		return // the purge reads the few blocks it spans
	}
	for {
		prev, linked := link(msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader))
		if !s.deleteMsg(ctx, msg.Sequence) || !linked || prev < first.Sequence {
			return
		}
		if msg, err = s.linked(ctx, subj, prev); err != nil {
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
