package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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

// purgeSpan is how many stream sequences a journal may span and still be
// deleted with one purge of its subject. A purge reads every block of the
// stream between the journal's first message and its last whose index of
// subjects the server no longer holds (it drops one unused for two
// minutes), and holds every other session's append while it does: 0.19 s
// for a chat used now and then over 1 GiB of others', 0.87 s over 4 GiB
// (BenchmarkDeleteLongLivedChat). Past it, the journal's messages are
// deleted one by one, found by their links, so that only the blocks that
// hold them are read, each under the stream's lock for a moment: 0.03 s
// over 4 GiB. The span is counted in messages, whatever their size, as a
// chat of a busy node spans many of others' small steps, and the cost of
// a purge is in its sizes and the one-by-one deletions' in the chat's
// messages: a quiet node's chats are purged.
const purgeSpan = 256

// walkBudget bounds deleteByLinks for one journal: about 13,000 messages
// on one server (0.37 ms a message, a read and a deletion, on a busy
// two-core machine), fewer on a cluster, where each deletion is
// replicated.
const walkBudget = 5 * time.Second

// deleteJournal deletes session's journal. Its messages are found from
// its last to its first by their links: each message's append expected
// the subject's last sequence to be the one before it (publish), and the
// stream keeps that header, so each names the one before it. A journal
// that spans more than purgeSpan sequences is deleted message by message
// (deleteByLinks). What the links do not reach (an append after the last
// message was read, a journal a backup's tail copied without its links, a
// message a replica behind has not got), and a journal that spans less,
// are purged; then the purge has few blocks or none to read.
func (s *Store) deleteJournal(ctx context.Context, session string) error {
	subj := subject(session)
	// The walk takes two requests a message: for a journal of very many,
	// or a sweep with many journals to delete, it leaves the rest to the
	// purge, and at least half the time left to it.
	budget := walkBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)/2)
	}
	walk, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	s.deleteByLinks(walk, subj)
	return s.journal.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

// deleteByLinks deletes subj's messages one by one from its last, when a
// link reaches further back than purgeSpan sequences from it. It never
// deletes a message of another subject: a link that names one ends the
// walk. Whatever ends it (a read or a deletion that fails, the server
// refusing deletions), the purge after it deletes the rest, and says what
// failed.
func (s *Store) deleteByLinks(ctx context.Context, subj string) {
	if s.deleteByLinksDenied.Load() {
		return
	}
	msg, err := s.journal.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return
	}
	floor := msg.Sequence - min(msg.Sequence, s.purgeSpan)
	// The messages near the last: a journal that has them all, the purge
	// deletes, reading the few blocks they are in.
	var near []uint64
	for {
		prev, linked := link(msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader))
		if !linked {
			return
		}
		near = append(near, msg.Sequence)
		if prev < floor {
			break
		}
		if msg, err = s.linked(ctx, subj, prev); err != nil {
			return
		}
	}
	for _, seq := range near {
		if !s.deleteMsg(ctx, seq) {
			return
		}
	}
	for {
		prev, _ := link(msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader))
		if msg, err = s.linked(ctx, subj, prev); err != nil || !s.deleteMsg(ctx, msg.Sequence) {
			return
		}
	}
}

// linked reads the message at seq, a link of subj's, if it is subj's.
func (s *Store) linked(ctx context.Context, subj string, seq uint64) (*jetstream.RawStreamMsg, error) {
	if seq == 0 {
		return nil, errors.New("the journal's first message links to none")
	}
	msg, err := s.journal.GetMsg(ctx, seq)
	if err == nil && msg.Subject != subj {
		err = fmt.Errorf("message %d is %s's, not %s's", seq, msg.Subject, subj)
	}
	return msg, err
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

// link reads a journal message's link: the sequence of the message before
// it on its subject, which its append expected (0, and false: the
// subject's first).
func link(header string) (uint64, bool) {
	seq, err := strconv.ParseUint(header, 10, 64)
	return seq, err == nil && seq > 0
}
