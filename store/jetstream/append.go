package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// batch is a Batch as the journal stores it.
type batch struct {
	Events []storedEvent   `json:"e,omitempty"`
	State  json.RawMessage `json:"s,omitempty"`
}

type storedEvent struct {
	Seq   int64           `json:"q"`
	Type  string          `json:"t"`
	Frame json.RawMessage `json:"f"`
}

// encodeBatch writes b as a batch, by hand: the frames and the state are
// JSON the engine made, copied as they are, where encoding/json would scan
// and compact every byte of them again at every step.
func encodeBatch(b engine.Batch) ([]byte, error) {
	size := len(`{"e":[],"s":}`) + len(b.State)
	for _, ev := range b.Events {
		size += len(`{"q":,"t":"","f":},`) + 20 + len(ev.Type) + len(ev.Frame)
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	if len(b.Events) > 0 {
		out = append(out, `"e":[`...)
		for i, ev := range b.Events {
			if len(ev.Frame) == 0 {
				return nil, fmt.Errorf("event %d (%s) has no frame", ev.Seq, ev.Type)
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"q":`...)
			out = strconv.AppendInt(out, ev.Seq, 10)
			out = append(out, `,"t":`...)
			out = engine.AppendJSONString(out, ev.Type)
			out = append(out, `,"f":`...)
			out = append(out, ev.Frame...)
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	if len(b.State) > 0 {
		if len(b.Events) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"s":`...)
		out = append(out, b.State...)
	}
	return append(out, '}'), nil
}

// lastMsg reads the last message of session's journal. The read is a direct
// get, which on a cluster only replicas that are caught up answer: right
// after a node dies or under load, none may be for a moment, and the server
// says "no responders". That passes; the read is tried again for a while.
func (s *Store) lastMsg(ctx context.Context, session string) (*jetstream.RawStreamMsg, error) {
	return fromReplicas(ctx, func() (*jetstream.RawStreamMsg, error) {
		return s.journal.GetLastMsgForSubject(ctx, subject(session))
	})
}

// firstMsg reads the first message of session's journal, as lastMsg reads
// its last.
func (s *Store) firstMsg(ctx context.Context, session string) (*jetstream.RawStreamMsg, error) {
	return fromReplicas(ctx, func() (*jetstream.RawStreamMsg, error) {
		return s.journal.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject(session)))
	})
}

// fromReplicas makes read, a direct get, again while no replica answers,
// for a while.
func fromReplicas(ctx context.Context, read func() (*jetstream.RawStreamMsg, error)) (*jetstream.RawStreamMsg, error) {
	var retry replicaRetry
	for {
		msg, err := read()
		if !errors.Is(err, nats.ErrNoResponders) || !retry.again(ctx) {
			return msg, err
		}
	}
}

// replicaTries is how many times a read that the stream's replicas did not
// answer is made; replicaRetryWait, the first wait between two, doubles
// each time (20 ms: about 2.5 s in all).
const replicaTries = 8

var replicaRetryWait = 20 * time.Millisecond

// replicaRetry paces the tries of a read that the stream's replicas did
// not answer (lastMsg, readJournal); its zero value is a first try.
type replicaRetry struct {
	tries int
	wait  time.Duration
}

// again waits before the next try and reports true, or reports false once
// replicaTries were made or ctx ended.
func (r *replicaRetry) again(ctx context.Context) bool {
	if r.tries++; r.tries >= replicaTries {
		return false
	}
	if r.wait == 0 {
		r.wait = replicaRetryWait
	}
	select {
	case <-time.After(r.wait):
	case <-ctx.Done():
		return false
	}
	r.wait *= 2
	return true
}

// headOf returns where session's journal ends, asking the server the first
// time.
func (s *Store) headOf(ctx context.Context, session string) (head, error) {
	s.mu.Lock()
	h, ok := s.heads[session]
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	msg, err := s.lastMsg(ctx, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return head{}, nil
	}
	if err != nil {
		return head{}, fmt.Errorf("failed to read the end of session %s's journal: %w", session, err)
	}
	h = head{stream: msg.Sequence}
	var b engine.Batch
	if !isPart(msg.Data) {
		if b, err = decodeBatch(msg.Data); err != nil {
			return head{}, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, session, msg.Sequence, err)
		}
	}
	if n := len(b.Events); n > 0 {
		h.seq = b.Events[n-1].Seq
	} else {
		// A step with no event, or a part: the last event is read from the
		// journal.
		if h.seq, err = s.lastEventSeq(ctx, session, msg); err != nil {
			return head{}, err
		}
	}
	return h, nil
}

// lastEventSeq finds the seq of session's last event by reading its
// journal through its last message, through; rare (the
// process restarted right after a step with no event, or one in parts).
func (s *Store) lastEventSeq(ctx context.Context, session string, through *jetstream.RawStreamMsg) (int64, error) {
	batches, err := s.loadThrough(ctx, session, 1, nil, through, 0)
	if err != nil {
		return 0, err
	}
	var last int64
	for _, b := range batches {
		if n := len(b.Events); n > 0 {
			last = b.Events[n-1].Seq
		}
	}
	return last, nil
}

// Append implements engine.Store.
func (s *Store) Append(ctx context.Context, session string, b engine.Batch) error {
	if !validID(session) {
		return fmt.Errorf("session id %q cannot name a journal", session)
	}
	if err := s.holds(session); err != nil {
		return err
	}
	if down := s.down.Load(); down != nil {
		return fmt.Errorf("failed to append to session %s's journal: %w", session, *down)
	}
	if b.Refs {
		s.markFormat2(ctx)
	}
	h, err := s.headOf(ctx, session)
	if err != nil {
		return err
	}
	if len(b.Events) > 0 && h.seq < b.Events[0].Seq-1 {
		return s.appendBehind(session, h.seq, b.Events[0].Seq)
	}
	if len(b.Events) > 0 && h.seq >= b.Events[0].Seq {
		// The journal has this batch's first event already: maybe an
		// earlier try, given up on (a timeout while NATS was away), that
		// landed later.
		rest, lh, ours, err := s.landed(ctx, session, b)
		switch {
		case err != nil:
			return err
		case !ours:
			// Another writer's events: this node's idea of the session is
			// behind its journal (another node ran it while this one's
			// lease lapsed). Fenced, the session leaves memory and loads
			// again from what the journal holds.
			return fmt.Errorf("%w: %w: session %s's journal holds event %d, which this node did not write", ErrFenced, engine.ErrSeqGap, session, b.Events[0].Seq)
		case empty(rest):
			s.stored(session, lh)
			return nil
		}
		b, h = rest, lh
	}
	last, err := engine.CheckBatch(h.seq, b)
	if err != nil {
		return err
	}
	seq, err := s.publishBatch(ctx, session, b, h)
	// Someone wrote after the end this node knew: the session's owner
	// now, or this node's own earlier try landing late, maybe part by
	// part while this one goes on (each try's remaining parts wait to
	// land after its last). Or no one did yet: the stream's leader
	// refuses a publish on a subject that has one in process, this
	// node's earlier try, which a cluster without its quorum holds
	// there until the quorum is back.
	for try := 0; wrongLast(err) && try < maxLandedTries; try++ {
		s.forgetHead(session)
		rest, lh, ours, lerr := s.landed(ctx, session, b)
		switch {
		case lerr != nil:
			return lerr
		case !ours && (lh.stream == h.stream || lh.stream > 0 && lh.stream < h.stream):
			// No one wrote after this node's last append (a replica
			// behind its leader may read from before it): the lease,
			// which holds checked, is still this node's.
			return fmt.Errorf("failed to append to session %s's journal: it ends where this node's appends left it, and the server refused the next all the same (%w): an earlier try may be in process there, in a cluster without its quorum", session, err)
		case !ours:
			return fmt.Errorf("%w: session %s: %w", ErrFenced, session, err)
		case empty(rest):
			s.stored(session, lh)
			return nil
		}
		seq, err = s.publishBatch(ctx, session, rest, lh)
		h = lh
	}
	if err != nil {
		if wrongLast(err) {
			s.forgetHead(session)
			return fmt.Errorf("%w: session %s: %w", ErrFenced, session, err)
		}
		return err
	}
	s.stored(session, head{stream: seq, seq: last})
	return nil
}

// maxLandedTries bounds how often an append looks for its own earlier try
// at the journal's end: an earlier try in parts may land one more part
// after each look.
const maxLandedTries = 4

// stored records where session's journal ends once a batch is stored.
func (s *Store) stored(session string, h head) {
	s.mu.Lock()
	s.heads[session] = h
	if len(s.splits) > 0 {
		delete(s.splits, session)
	}
	if len(s.behind) > 0 {
		delete(s.behind, session)
	}
	s.mu.Unlock()
}

// behindTries is how many appends in a row may find a session's journal
// ending before what this node stored of it before the session is fenced.
// A replica a moment behind its leader answers one read so (the next, a
// second later, finds it caught up); a journal purged or restored under
// the session answers every read so.
const behindTries = 3

// appendBehind answers an append whose journal ends at last, before
// first, the batch's first event, which follows what this node stored:
// ErrSeqGap, tried again; at the behindTries-th in a row, ErrFenced: the
// journal was purged or restored under the session (an operator's purge, a
// copy put back), and the session leaves memory to load again from what
// the journal holds, or to find it gone. Retried, it would never fit, and
// the node would stay not ready.
func (s *Store) appendBehind(session string, last, first int64) error {
	s.mu.Lock()
	delete(s.heads, session) // the next try reads the end again
	s.behind[session]++
	n := s.behind[session]
	if n >= behindTries {
		delete(s.behind, session)
	}
	s.mu.Unlock()
	err := fmt.Errorf("%w: session %s's journal ends at event %d, before event %d, which follows what this node stored of it", engine.ErrSeqGap, session, last, first)
	if n < behindTries {
		return err
	}
	return fmt.Errorf("%w: %w: the journal was purged or restored meanwhile", ErrFenced, err)
}

// splitTry is a step this node is appending in parts: the seq of the
// journal's last event before it, and the name of its set of parts. The
// tries of one step, until one is stored, share the name.
type splitTry struct {
	after int64
	set   string
}

// publishBatch appends b to session's journal after h, its end (publish),
// in parts when it is larger than a message, and returns the stream
// sequence of its message (its last part).
func (s *Store) publishBatch(ctx context.Context, session string, b engine.Batch, h head) (uint64, error) {
	data, err := encodeBatch(b)
	if err != nil {
		return 0, fmt.Errorf("failed to encode a batch of session %s: %w", session, err)
	}
	var seq uint64
	if limit := s.messageLimit(); len(data) <= limit {
		seq, err = s.publish(ctx, subject(session), data, h.stream)
	} else {
		seq, err = s.publishParts(ctx, session, data, limit, h)
	}
	if err != nil && !wrongLast(err) {
		return 0, fmt.Errorf("failed to append to session %s's journal: %w", session, err)
	}
	return seq, err
}

// messageLimit is the largest payload of a journal message: what the NATS
// server takes (max_payload) and the stream keeps, less the room of a
// publish's headers.
func (s *Store) messageLimit() int {
	limit := min(int(s.nc.MaxPayload()), MaxMessage)
	if m := s.journal.CachedInfo().Config.MaxMsgSize; m > 0 {
		limit = min(limit, int(m))
	}
	return max(limit-partSlack, partSlack)
}

// publishParts stores data, a batch's encoding, in parts of at most limit
// bytes after h, each fenced on the one before, and returns the stream
// sequence of its last part.
func (s *Store) publishParts(ctx context.Context, session string, data []byte, limit int, h head) (uint64, error) {
	s.markFormat2(ctx)
	s.mu.Lock()
	try, ok := s.splits[session]
	if !ok || try.after != h.seq {
		try = splitTry{after: h.seq, set: nuid.Next()}
		s.splits[session] = try
	}
	s.mu.Unlock()
	count := partCount(data, limit, try.set)
	msg := make([]byte, 0, limit)
	seq := h.stream
	for i := 1; i <= count; i++ {
		// A set takes a round trip a part: a lease that lapses meanwhile
		// stops it, as it stops an append.
		if err := s.holds(session); err != nil {
			return 0, err
		}
		msg = appendPart(msg[:0], data, limit, try.set, i, count)
		var err error
		if seq, err = s.publish(ctx, subject(session), msg, seq); err != nil {
			if !wrongLast(err) {
				err = fmt.Errorf("part %d of %d: %w", i, count, err)
			}
			return 0, err
		}
		if afterPart != nil {
			afterPart(i)
		}
	}
	return seq, nil
}

// afterPart, when set, is called after each part is stored (tests).
var afterPart func(index int)

// empty: b holds nothing to append (landed took all of it).
func empty(b engine.Batch) bool { return b.Events == nil && b.State == nil }

// wrongLast reports the server's refusal of a fenced publish: the subject's
// last message was not the one expected.
func wrongLast(err error) bool {
	code := apiErrorCode(err)
	return code == jetstream.JSErrCodeStreamWrongLastSequence || code == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// landed reads the journal's last message, and reports whether it is this
// node's own try of b that landed after the node gave it up (ours): a
// publish times out while NATS is away, and the client sends it once NATS
// is back. Such a try holds the same events from b's first, maybe fewer
// (the engine joins what waited meanwhile into its next try) and then no
// state (only the last batch joined carries one); a step with no event,
// the same state. It returns what of b is left to append (nothing: all of
// it landed) and where the journal ends: its last message's stream
// sequence, whoever wrote it. A message that is not such a try is someone
// else's, or this node's last stored, which the caller tells apart by that
// sequence.
func (s *Store) landed(ctx context.Context, session string, b engine.Batch) (rest engine.Batch, h head, ours bool, err error) {
	msg, err := s.lastMsg(ctx, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return b, head{}, false, nil
	}
	if err != nil {
		return b, head{}, false, fmt.Errorf("failed to read the end of session %s's journal: %w", session, err)
	}
	h = head{stream: msg.Sequence}
	p, split, err := readPart(msg.Data)
	var got engine.Batch
	switch {
	case err != nil:
	case !split:
		got, err = decodeBatch(msg.Data)
	default:
		s.mu.Lock()
		try, trying := s.splits[session]
		s.mu.Unlock()
		switch {
		case !trying || try.set != p.set:
			return b, h, false, nil // another writer's
		case p.index < p.count:
			// A try of b in parts that stopped part way: b goes whole
			// after it.
			h.seq = try.after
			return b, h, true, nil
		}
		// A try in parts that landed whole: read it back.
		var batches []engine.Batch
		if batches, err = s.loadThrough(ctx, session, 1, nil, msg, 0); err != nil {
			return b, head{}, false, err
		}
		if len(batches) == 0 {
			return b, head{}, false, fmt.Errorf("%w: session %s's journal ends with a set of parts and holds no batch", engine.ErrCorrupt, session)
		}
		got = batches[len(batches)-1]
	}
	if err != nil {
		return b, head{}, false, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, session, msg.Sequence, err)
	}
	n := len(got.Events)
	switch {
	case n == 0 && len(b.Events) == 0 && got.State != nil && bytes.Equal(got.State, b.State):
		if h.seq, err = s.lastEventSeq(ctx, session, msg); err != nil {
			return b, head{}, false, err
		}
	case n == 0 || n > len(b.Events) || n < len(b.Events) && got.State != nil || n == len(b.Events) && !bytes.Equal(got.State, b.State):
		return b, h, false, nil
	default:
		for i, ev := range got.Events {
			if ev.Seq != b.Events[i].Seq || !bytes.Equal(ev.Frame, b.Events[i].Frame) {
				return b, h, false, nil
			}
		}
		h.seq = got.Events[n-1].Seq
	}
	s.mu.Lock()
	s.heads[session] = h
	s.mu.Unlock()
	if n == len(b.Events) {
		return engine.Batch{}, h, true, nil
	}
	return engine.Batch{Events: b.Events[n:], State: b.State, Agent: b.Agent, Refs: b.Refs}, h, true, nil
}

func (s *Store) forgetHead(session string) {
	s.mu.Lock()
	delete(s.heads, session)
	s.mu.Unlock()
}
