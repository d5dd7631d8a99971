package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A session's journal is read with the stream's batched direct gets (the
// stream has AllowDirect; servers from 2.11 answer them): one request a
// batch, answered by the messages and an end-of-batch status, with no
// consumer on the server. An ordered consumer, as the client makes one,
// cost each load a consumer that stayed for its inactive threshold (five
// minutes) with four goroutines and about 46 KiB of the server's heap,
// and 0.7 to 1.1 ms for a short journal (BenchmarkLoad). A server that
// knows no batch is still read with one, deleted once read.
const directGetPrefix = "$JS.API.DIRECT.GET."

// loadBatch is the messages one request asks for, and loadBatchBytes
// bounds what a batch carries (it may end one message past it).
var (
	loadBatch      = 256
	loadBatchBytes = 16 << 20
)

// Load implements engine.Store.
func (s *Store) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	if !validID(session) {
		return nil, fmt.Errorf("%w: %q", engine.ErrNoSession, session)
	}
	last, err := s.lastMsg(ctx, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: %q", engine.ErrNoSession, session)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read session %s's journal: %w", session, err)
	}
	out, err := s.readJournal(ctx, session, last.Sequence)
	if errors.Is(err, errNoBatchGet) {
		out, err = s.readJournalByConsumer(ctx, session, last.Sequence)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read session %s's journal: %w", session, err)
	}
	return out, nil
}

// errNoBatchGet: the server answered a batched direct get with one message
// and its headers, as servers before 2.11 do, which know no batch.
var errNoBatchGet = errors.New("the NATS server does not answer batched direct gets")

// readJournalByConsumer reads the journal as readJournal does, with an
// ordered consumer, for a server that knows no batched direct get; the
// consumer is deleted once read, rather than left to its inactive
// threshold.
func (s *Store) readJournalByConsumer(ctx context.Context, session string, through uint64) ([]engine.Batch, error) {
	cons, err := s.journal.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject(session)}})
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, JournalStream, cons.CachedInfo().Name) // else it expires by itself
	}()
	var out []engine.Batch
	for {
		msgs, err := cons.Fetch(1000, jetstream.FetchMaxWait(apiTimeout))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range msgs.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			b, err := decodeBatch(m.Data())
			if err != nil {
				return nil, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, session, meta.Sequence.Stream, err)
			}
			out = append(out, b)
			if meta.Sequence.Stream >= through {
				return out, nil
			}
		}
		if err := msgs.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("it ends at message %d, and reading stopped before it", through)
		}
	}
}

// readJournal reads session's journal from its start to its end, which is
// at least the message at stream sequence through (its last, as lastMsg
// read it; none is appended after it while this node holds the lease).
// The answers carry the messages' payloads only: the client would parse
// every message's headers into a map (30 allocations a message), and the
// batch's end says the last sequence it sent and how many follow it. On
// a cluster a replica that is behind answers with less: each replica
// holds a prefix of the stream, so what comes is still in order and
// whole, and the read asks again for the rest, for a while, as lastMsg
// does.
func (s *Store) readJournal(ctx context.Context, session string, through uint64) ([]engine.Batch, error) {
	// The answers' channel holds a whole batch and the status after it:
	// one request is answered at a time, so none is ever dropped. (A
	// synchronous subscription's is the client's 65,536 messages, 512 KiB
	// made for every load.)
	inbox := s.nc.NewInbox()
	answers := make(chan *nats.Msg, loadBatch+2)
	sub, err := s.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	r := journalReader{session: session, next: 1, answers: answers}
	wait := 20 * time.Millisecond
	for tries := 1; ; {
		req := fmt.Appendf(nil, `{"seq":%d,"next_by_subj":%q,"batch":%d,"max_bytes":%d,"no_hdr":true}`, r.next, subject(session), loadBatch, loadBatchBytes)
		if err := s.nc.PublishRequest(directGetPrefix+JournalStream, inbox, req); err != nil {
			return nil, err
		}
		end, err := r.readBatch(ctx)
		switch {
		case err != nil:
			return nil, err
		case end.pending > 0 || end.sent && r.next <= through:
			tries, wait = 1, 20*time.Millisecond // more to read: at once
			continue
		case r.next > through:
			return r.out, nil
		case tries == 8:
			return nil, fmt.Errorf("it ends at message %d, and the stream's replicas answered only up to message %d", through, r.next-1)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		tries, wait = tries+1, wait*2
	}
}

// journalReader is a readJournal in progress.
type journalReader struct {
	session string
	next    uint64 // the stream sequence to read from
	out     []engine.Batch
	answers <-chan *nats.Msg
}

// batchEnd is what a batch's end said: whether it sent any message, and
// how many of the session's follow its last.
type batchEnd struct {
	sent    bool
	pending uint64
}

// readBatch takes one request's answer: the messages' payloads, then the
// end of the batch, whose last sequence is where the next batch starts.
// A 404 (nothing from next on) or a 503 (no responders, while a stream's
// leader changes) sends nothing, and readJournal asks again.
func (r *journalReader) readBatch(ctx context.Context) (batchEnd, error) {
	timeout := time.NewTimer(apiTimeout)
	defer timeout.Stop()
	var end batchEnd
	for {
		var msg *nats.Msg
		select {
		case msg = <-r.answers:
		case <-timeout.C:
			return end, fmt.Errorf("no answer from the stream in %s", apiTimeout)
		case <-ctx.Done():
			return end, ctx.Err()
		}
		if msg.Header == nil { // a message of the journal
			b, err := decodeBatch(msg.Data)
			if err != nil {
				return end, fmt.Errorf("%w: session %s, its journal's message %d: %w", engine.ErrCorrupt, r.session, len(r.out)+1, err)
			}
			r.out = append(r.out, b)
			end.sent = true
			continue
		}
		switch status := msg.Header.Get("Status"); status {
		case "": // a message with its headers: a server that ignored the batch
			return end, errNoBatchGet
		case "204": // the end of the batch
			last, err := strconv.ParseUint(msg.Header.Get(jetstream.LastSequenceHeader), 10, 64)
			if err != nil {
				return end, fmt.Errorf("the end of a batch without its last sequence (%q)", msg.Header.Get(jetstream.LastSequenceHeader))
			}
			if end.pending, err = strconv.ParseUint(msg.Header.Get(numPendingHeader), 10, 64); err != nil {
				return end, fmt.Errorf("the end of a batch without its pending count (%q)", msg.Header.Get(numPendingHeader))
			}
			if end.sent {
				r.next = last + 1
			}
			return end, nil
		case "404", "503":
			return end, nil
		default:
			return end, fmt.Errorf("the stream answered %s %s", status, msg.Header.Get("Description"))
		}
	}
}

// numPendingHeader is the direct get's count of the messages after a
// batch's last that match its subject.
const numPendingHeader = "Nats-Num-Pending"
