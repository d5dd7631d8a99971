package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/clienttools/gateway/engine"
)

// A replay from the middle of a long chat reads the journal from the batch
// that holds its first event, found by a binary search over the stream's
// sequences: the journal's batches are in order of their events (each
// follows the last: engine.CheckBatch), and a look at one message, a
// batched direct get of one, tells where it stands. A search of a stream
// of a million messages takes about twenty looks, each a message read,
// where a chat of thousands of turns is tens of megabytes. A journal that
// spans far is read back by its links to that batch instead (links.go):
// each look would scan the blocks between two of its messages.

// maxLooks bounds a search's looks: past it the read starts at the best
// batch found so far.
const maxLooks = 64

var _ engine.JournalFrom = (*Store)(nil)

// LoadFrom implements engine.JournalFrom.
func (s *Store) LoadFrom(ctx context.Context, session string, from int64) ([]engine.Batch, error) {
	last, err := s.journalEnd(ctx, session)
	if err != nil {
		return nil, err
	}
	return s.loadThrough(ctx, session, 1, nil, last, from)
}

// batchHolding returns the stream sequence of a batch of session's journal
// whose first event is from or before it, as late a one as its looks find,
// among the messages up to through; 1 (the journal's start) when none is
// found. A page that resumes mostly lacks the chat's last events: the
// looks go back from the end, twice as far each time, then halve the
// span between the last two (recent messages are the ones the server
// holds in memory). A look that fails ends the search where it is: the
// read that follows says what is wrong, if anything is.
func (s *Store) batchHolding(ctx context.Context, session string, from int64, through uint64) uint64 {
	answers, err := s.subscribeAnswers()
	if err != nil {
		return 1
	}
	defer answers.stop()
	// lo: a batch whose first event is from or before (1: the start). hi:
	// no batch from it on has one.
	lo, hi := uint64(1), through+1
	back := uint64(16)
	for looks := 0; hi-lo > 1 && looks < maxLooks; {
		mid := lo + (hi-lo)/2
		if back < hi-lo {
			mid = hi - back
			back *= 2
		}
		l, n, err := lookFrom(ctx, answers, session, mid, hi, maxLooks-looks)
		looks += n
		switch {
		case err != nil:
			if errors.Is(err, errNoBatchGet) {
				s.noBatchGet.Store(true)
			}
			return lo
		case !l.found || l.first > from:
			// None found (or a set's later part, whose start is behind
			// mid): no later batch is taken, and the read may start
			// earlier than it could, never later.
			hi = mid
		default:
			lo = l.at
			back = hi // found: halve from now on
		}
	}
	return lo
}

// look is what lookFrom found: the stream sequence of a message that
// starts a batch with events, and that batch's first event's seq.
type look struct {
	found bool
	at    uint64
	first int64
}

// lookFrom looks at session's journal from stream sequence at on, before
// stream sequence before, for the first message that starts a batch with
// events, past batches of a state alone. It stops at a part that goes on
// a set: its set's start is behind, and the parts after it may be many
// megabytes, which a look would read for nothing. It takes at most limit
// looks, and says how many it took.
func lookFrom(ctx context.Context, answers *batchAnswers, session string, at, before uint64, limit int) (look, int, error) {
	var data []byte
	r := directReader{next: at, take: func(d []byte) error { data = d; return nil }}
	looks := 0
	for looks < limit && r.next < before {
		looks++
		data = nil
		end, err := answers.batchOf(ctx, JournalStream, subject(session), &r, 1)
		if err != nil {
			return look{}, looks, err
		}
		if !end.sent {
			return look{}, looks, fmt.Errorf("%w: no message at or after stream sequence %d (%s)", errNoDirectAnswer, r.next, end.status)
		}
		seq := r.next - 1 // the one message sent
		if seq >= before {
			break
		}
		first, kind, err := firstEvent(data)
		switch {
		case err != nil:
			return look{}, looks, fmt.Errorf("%w: session %s, the message at stream sequence %d: %w", engine.ErrCorrupt, session, seq, err)
		case kind == startsEvents:
			return look{found: true, at: seq, first: first}, looks, nil
		case kind == goesOnSet:
			return look{}, looks, nil
		}
	}
	return look{}, looks, nil
}

// batchStart is how a journal message's batch begins when it has events
// (encodeBatch, and encoding/json before it).
var batchStart = []byte(`{"e":[{"q":`)

// start is what a journal message is to a search for a batch.
type start int

const (
	startsNone   start = iota // a batch of a state alone (or of a shape not read here)
	startsEvents              // a batch with events, or a set's first part
	goesOnSet                 // a part after a set's first
)

// firstEvent reads what a journal message starts, and for a batch with
// events, its first event's seq.
func firstEvent(data []byte) (int64, start, error) {
	p, isPart, err := readPart(data)
	switch {
	case err != nil:
		return 0, startsNone, err
	case isPart && p.index > 1:
		return 0, goesOnSet, nil
	case isPart:
		data = p.piece
	}
	rest, found := bytes.CutPrefix(data, batchStart)
	if !found {
		return 0, startsNone, nil
	}
	end := 0
	for end < len(rest) && end < 20 && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	seq, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return 0, startsNone, fmt.Errorf("a batch whose first event's seq is not a number (%.40q)", data)
	}
	return seq, startsEvents, nil
}
