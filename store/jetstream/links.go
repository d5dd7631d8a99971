package jetstream

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go/jetstream"
)

// A journal's messages are linked: each append expects the subject's last
// sequence to be the one before it (publish), and the stream keeps that
// header with the message, so each names the one before it, and the first
// names none. A read or a purge of a subject finds each message after the
// one before it, reading every block of the stream between them whose
// index of subjects the server dropped (one unused for two minutes), and
// holds the stream's appends while it does: purged, a chat used now and
// then over 1 GiB of others' held every other chat's appends 0.19 s, over
// 4 GiB 0.87 s; read, 0.26 s over 1 GiB (BenchmarkDeleteLongLivedChat,
// BenchmarkLoadLongLivedChat, -delete-after 130s). A journal that spans
// more than farBytes of the stream is found by its links instead, each
// message a read of the block that holds it (deleteByLinks, readByLinks):
// a request a message, where a batched read takes hundreds.

// farBytes is how much of the stream a journal may span and still be read
// in batches, or purged: about 6 ms of blocks read in.
const farBytes = 32 << 20

// journalRate is the journal stream's mean bytes a second, over the time
// its messages span, read at most every rateEvery.
type journalRate struct {
	mu   sync.Mutex
	at   time.Time // when rate was read; zero: never
	rate float64   // 0: the stream holds less than farBytes, so nothing spans it
}

const rateEvery = 10 * time.Second

// read returns stream's rate, reading it again when it is older than
// rateEvery; 0 when the stream holds far bytes or less, or cannot be read.
// The lock is not held over the request: a load or a deletion that finds
// the rate fresh does not wait for another's (on a restart, every session
// loads at once). Two that find it stale both ask.
func (r *journalRate) read(ctx context.Context, stream jetstream.Stream, far uint64) float64 {
	r.mu.Lock()
	at, rate := r.at, r.rate
	r.mu.Unlock()
	if time.Since(at) < rateEvery {
		return rate
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0 // the batched read or the purge, as before
	}
	rate = 0
	if st := info.State; st.Bytes > far {
		rate = float64(st.Bytes) / max(st.LastTime.Sub(st.FirstTime).Seconds(), 1)
	}
	r.mu.Lock()
	r.at, r.rate = time.Now(), rate
	r.mu.Unlock()
	return rate
}

// farFirst returns subj's first message at stream sequence start or
// after (first, when the caller read it; else read here), when its
// journal from there to last spans more than s.farBytes of the stream;
// nil when it does not, or the stream holds too little for any journal to
// (then nothing is asked of the server but its stream's size, every
// rateEvery). The span is judged from the time between the two messages
// at the stream's mean rate: sizes differ from step to step, and the time
// between two messages says more of what lies between them than their
// sequences do.
func (s *Store) farFirst(ctx context.Context, subj string, start uint64, first, last *jetstream.RawStreamMsg) *jetstream.RawStreamMsg {
	rate := s.rate.read(ctx, s.journal, s.farBytes)
	if rate == 0 {
		return nil
	}
	if first == nil {
		var err error
		if first, err = s.journal.GetMsg(ctx, max(start, 1), jetstream.WithGetMsgSubject(subj)); err != nil {
			return nil
		}
	}
	if first.Sequence > last.Sequence || last.Time.Sub(first.Time).Seconds()*rate <= float64(s.farBytes) {
		return nil
	}
	return first
}

// walkBudget bounds a walk by links of one journal: about 50,000 messages
// deleted on one server (0.1 ms a message, a read and a deletion, on a
// two-core machine; 0.7 ms under the race detector), fewer on a cluster,
// where each read is a round trip and each deletion is replicated.
const walkBudget = 5 * time.Second

// walkContext is ctx for a walk by links, which takes a request or two a
// message: for a journal of very many, or a sweep with many journals to
// delete, it leaves the rest to the purge or the batched read, and at
// least half the time left to it.
func walkContext(ctx context.Context) (context.Context, context.CancelFunc) {
	budget := walkBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)/2)
	}
	return context.WithTimeout(ctx, budget)
}

// before returns the message before msg on subj, the one msg's link
// names, back to first (returned as it is, not read again); false when
// the link does not lead there: none, one before first, one to another
// subject's message, a read that fails, or one that does not go back (no
// server stores such a link: it checks the one each append gives, and
// one would send a walk round).
func (s *Store) before(ctx context.Context, subj string, msg, first *jetstream.RawStreamMsg) (*jetstream.RawStreamMsg, bool) {
	prev := link(msg)
	switch {
	case prev == first.Sequence:
		return first, true
	case prev < first.Sequence, prev >= msg.Sequence:
		return nil, false
	}
	m, err := s.journal.GetMsg(ctx, prev)
	if err != nil || m.Subject != subj {
		return nil, false
	}
	return m, true
}

// readByLinks reads session's journal from stream sequence start (1: its
// start; else a batch's first message) to last, its last message, by
// their links from the last, when it spans far (farFirst). With from past
// 1, it stops at the batch that holds event from (a replay's read: a
// search of the journal's middle would look across the blocks between its
// messages). It returns the batches it read, from the oldest, and where
// the read in batches is to go before them: to the message before stream
// sequence below (0: nowhere, the walk read it all). A walk that stops
// short of start (out of its time, a message published by hand without
// its link, one a replica behind has not got) keeps what it read from the
// first batch with events on; a journal that does not span far is read
// in batches whole (nothing read, below past last). On a stream that
// holds less than farBytes it asks the server nothing but the stream's
// size, every rateEvery.
func (s *Store) readByLinks(ctx context.Context, session string, start uint64, first, last *jetstream.RawStreamMsg, from int64) (out []engine.Batch, below uint64, err error) {
	none := last.Sequence + 1
	if s.noBatchGet.Load() {
		return nil, none, nil
	}
	subj := subject(session)
	if first = s.farFirst(ctx, subj, start, first, last); first == nil {
		return nil, none, nil
	}
	msgs := []*jetstream.RawStreamMsg{last} // the last first
	for msg := last; msg.Sequence != first.Sequence && !holds(msg.Data, from); msgs = append(msgs, msg) {
		var ok bool
		if msg, ok = s.before(ctx, subj, msg, first); ok {
			continue
		}
		// Short of start: what was read stays, from a batch's start on
		// (a set's parts whole), and the batched read reads before it.
		for len(msgs) > 0 {
			if _, kind, err := firstEvent(msgs[len(msgs)-1].Data); err == nil && kind == startsEvents {
				break
			}
			msgs = msgs[:len(msgs)-1]
		}
		if len(msgs) == 0 {
			return nil, none, nil
		}
		below = msgs[len(msgs)-1].Sequence
		break
	}
	r := newJournalReader(session, msgs[len(msgs)-1].Sequence, last.Sequence)
	for i := len(msgs) - 1; i >= 0; i-- {
		r.next = msgs[i].Sequence
		if err := r.keep(msgs[i].Data); err != nil {
			return nil, 0, err
		}
	}
	return r.out, below, nil
}

// holds reports whether a journal message starts a batch whose first
// event is from or before it, from past 1.
func holds(data []byte, from int64) bool {
	if from <= 1 {
		return false
	}
	first, kind, err := firstEvent(data)
	return err == nil && kind == startsEvents && first <= from
}

// link reads a journal message's link: the sequence of the message before
// it on its subject, which its append expected; 0 for the subject's first
// (or a message published without one).
func link(msg *jetstream.RawStreamMsg) uint64 {
	seq, _ := strconv.ParseUint(msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader), 10, 64)
	return seq
}
