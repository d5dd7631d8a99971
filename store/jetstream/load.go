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
// knows no batch, or replicas that do not answer it, are still read with
// one, deleted once read.
const directGetPrefix = "$JS.API.DIRECT.GET."

// loadBatch is the messages one request asks for, and loadBatchBytes
// bounds what a batch carries (it may end one message past it).
var (
	loadBatch      = 256
	loadBatchBytes = 16 << 20
)

// Sentinel errors of readJournal that Load reads with a consumer instead.
var (
	// errNoBatchGet: the server answered a batched direct get with one
	// message and its headers, as servers before 2.11 do.
	errNoBatchGet = errors.New("the NATS server does not answer batched direct gets")
	// errNoDirectAnswer: the stream's replicas stopped short of the
	// journal's end, or did not answer in time.
	errNoDirectAnswer = errors.New("the stream's replicas did not answer the whole journal")
)

// Load implements engine.Store. A journal whose first message links to
// an earlier one lost its start to a deletion cut short (deleteByLinks
// deletes the first message before the others): Load finishes the
// deletion, and the session is gone.
func (s *Store) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	last, err := s.journalEnd(ctx, session)
	if err != nil {
		return nil, err
	}
	first, err := s.journalStart(ctx, session)
	if err != nil {
		return nil, err
	}
	if link(first) > 0 {
		return nil, s.finishDeletion(ctx, session, first.Sequence)
	}
	return s.loadThrough(ctx, session, 1, first, last, 0)
}

// journalStart returns session's journal's first message, or ErrNoSession
// (deleted since its end was read).
func (s *Store) journalStart(ctx context.Context, session string) (*jetstream.RawStreamMsg, error) {
	first, err := s.firstMsg(ctx, session)
	return journalMsg(session, first, err)
}

// finishDeletion deletes what is left of session's journal, whose first
// message, at stream sequence at, is not its start, and its summary, and
// returns ErrNoSession: the deletion was asked for, and what is left is
// its last steps without their start, no chat to run.
func (s *Store) finishDeletion(ctx context.Context, session string, at uint64) error {
	if err := s.Delete(ctx, session); err != nil {
		s.opts.Logger.Warn("a session's deletion was cut short, and what is left of it could not be deleted: it cannot be loaded, and is deleted when asked again", "session", session, "err", err)
	} else {
		s.opts.Logger.Info("a session's deletion was cut short: what was left of it is deleted now", "session", session)
	}
	return fmt.Errorf("%w: session %s was being deleted (its journal starts at a message that follows a deleted one, stream sequence %d)", engine.ErrNoSession, session, at)
}

// journalEnd returns session's journal's last message, or ErrNoSession.
func (s *Store) journalEnd(ctx context.Context, session string) (*jetstream.RawStreamMsg, error) {
	if !validID(session) {
		return nil, fmt.Errorf("%w: %q", engine.ErrNoSession, session)
	}
	last, err := s.lastMsg(ctx, session)
	return journalMsg(session, last, err)
}

// journalMsg is a read of one of session's journal's messages as a load
// answers it: no message is ErrNoSession, a read that failed
// ErrStoreUnavailable.
func journalMsg(session string, msg *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, fmt.Errorf("%w: %q", engine.ErrNoSession, session)
	case err != nil:
		return nil, fmt.Errorf("%w: failed to read session %s's journal: %w", engine.ErrStoreUnavailable, session, err)
	}
	return msg, nil
}

// loadThrough reads session's journal from the message at stream sequence
// start (1: its start; else where a batch starts) to last, its last
// message as lastMsg read it: by its messages' links when it spans far
// (links.go), else in batches. first is its first message from start on,
// when the caller read it (nil: read when needed). With from past 1
// (LoadFrom), it may start at the batch that holds event from, found by
// its links or by a search (batchHolding).
func (s *Store) loadThrough(ctx context.Context, session string, start uint64, first, last *jetstream.RawStreamMsg, from int64) ([]engine.Batch, error) {
	walk, cancel := walkContext(ctx)
	out, below, err := s.readByLinks(walk, session, start, first, last, from)
	cancel()
	if err == nil && below > 0 {
		through := below - 1
		if from > 1 && start <= 1 && !s.noBatchGet.Load() {
			start = s.batchHolding(ctx, session, from, through)
		}
		var before []engine.Batch
		if before, err = s.readBatched(ctx, session, start, through); err == nil {
			out = append(before[:upTo(before, out)], out...)
		}
	}
	switch {
	case errors.Is(err, engine.ErrCorrupt):
		return nil, fmt.Errorf("failed to read session %s's journal: %w", session, err)
	case err != nil:
		return nil, fmt.Errorf("%w: failed to read session %s's journal: %w", engine.ErrStoreUnavailable, session, err)
	}
	return out, nil
}

// upTo is how many of before, a read in batches that may have gone past
// the message it was to end at (a batch of messages is not bounded by a
// sequence), come before after, the journal's batches from a batch with
// events on: those before its first event.
func upTo(before, after []engine.Batch) int {
	if len(after) == 0 || len(after[0].Events) == 0 {
		return len(before)
	}
	next := after[0].Events[0].Seq
	for i, b := range before {
		if len(b.Events) > 0 && b.Events[0].Seq >= next {
			return i
		}
	}
	return len(before)
}

// readBatched reads session's journal from start to through in batches
// of its messages, or through a consumer.
func (s *Store) readBatched(ctx context.Context, session string, start, through uint64) ([]engine.Batch, error) {
	return readDirect(s,
		func() ([]engine.Batch, error) { return s.readJournal(ctx, session, start, through) },
		// The stream's leader serves a consumer.
		func() ([]engine.Batch, error) { return s.readJournalByConsumer(ctx, session, start, through) })
}

// readDirect reads with batched direct gets (direct), or with fallback when
// the server knows none (remembered from then on: errNoBatchGet) or the
// stream's replicas did not answer the whole read (errNoDirectAnswer).
func readDirect[T any](s *Store, direct, fallback func() (T, error)) (T, error) {
	if !s.noBatchGet.Load() {
		v, err := direct()
		if errors.Is(err, errNoBatchGet) {
			s.noBatchGet.Store(true)
		}
		if !errors.Is(err, errNoBatchGet) && !errors.Is(err, errNoDirectAnswer) {
			return v, err
		}
	}
	return fallback()
}

// readJournal reads session's journal from stream sequence start (1: its
// start; else a batch's first message) to the message at stream sequence
// through (its last, as lastMsg read it: a load, before the session runs,
// reads it whole; a replay's read, while the session runs, what was
// appended before it, or less if a replica that answered lags).
// It asks for the messages' payloads only (no_hdr, from 2.12): the client
// would parse every message's headers into a map, 30 allocations a
// message. The batch's end says the last sequence it sent, where the next
// batch starts. On a cluster a replica that is behind answers with less:
// each replica holds a prefix of the stream, so what comes is still in
// order and whole, and the read asks again for the rest, for a while.
func (s *Store) readJournal(ctx context.Context, session string, start, through uint64) ([]engine.Batch, error) {
	answers, err := s.subscribeAnswers()
	if err != nil {
		return nil, err
	}
	defer answers.stop()
	r := newJournalReader(session, start, through)
	var retry replicaRetry
	for {
		end, err := answers.batch(ctx, JournalStream, subject(session), &r.directReader)
		if err != nil {
			return nil, err
		}
		switch {
		case r.next > through:
			return r.out, nil
		case end.sent:
			retry = replicaRetry{} // more to read: at once
		case !retry.again(ctx):
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: it ends at message %d, and the answers stopped at %d (the last: %s)", errNoDirectAnswer, through, r.next-1, end.status)
		}
	}
}

// batchAnswers is the subscription a read's batches are answered on. Its
// channel holds a whole batch and the status after it: one request is
// answered at a time, so none is dropped (Dropped says so if one ever
// is). A synchronous subscription's is the client's 65,536 messages, 512
// KiB made for every read.
type batchAnswers struct {
	nc    *nats.Conn
	inbox string
	sub   *nats.Subscription
	ch    chan *nats.Msg
}

// subscribeAnswers makes the subscription a read's batches come on.
func (s *Store) subscribeAnswers() (*batchAnswers, error) {
	a := &batchAnswers{nc: s.nc, inbox: s.nc.NewInbox(), ch: make(chan *nats.Msg, loadBatch+2)}
	var err error
	if a.sub, err = s.nc.ChanSubscribe(a.inbox, a.ch); err != nil {
		return nil, err
	}
	return a, nil
}

// stop ends the subscription.
func (a *batchAnswers) stop() { _ = a.sub.Unsubscribe() }

// batch asks stream for the next batch of the messages on filter (""
// every message) from r.next on, payloads only, and reads its answer into
// r.
func (a *batchAnswers) batch(ctx context.Context, stream, filter string, r *directReader) (batchEnd, error) {
	return a.batchOf(ctx, stream, filter, r, loadBatch)
}

// batchOf is batch for a batch of at most n messages.
func (a *batchAnswers) batchOf(ctx context.Context, stream, filter string, r *directReader, n int) (batchEnd, error) {
	req := fmt.Appendf(nil, `{"seq":%d,"batch":%d,"max_bytes":%d,"no_hdr":true`, r.next, n, loadBatchBytes)
	if filter != "" {
		req = fmt.Appendf(req, `,"next_by_subj":%q`, filter)
	}
	req = append(req, '}')
	if err := a.nc.PublishRequest(directGetPrefix+stream, a.inbox, req); err != nil {
		return batchEnd{}, err
	}
	end, err := r.readBatch(ctx, a.ch)
	if err != nil {
		return end, err
	}
	if n, _ := a.sub.Dropped(); n > 0 {
		return end, fmt.Errorf("%d of the stream's answers were dropped", n)
	}
	return end, nil
}

// directReader takes the answers to batched direct gets: each message's
// payload goes to take, and next is where the next batch starts.
type directReader struct {
	next uint64 // the stream sequence to read from
	take func(data []byte) error
}

// journalReader is a readJournal in progress (or its consumer's fallback).
type journalReader struct {
	directReader
	session string
	through uint64 // the journal's last message, as lastMsg read it
	parts   joiner
	out     []engine.Batch
}

func newJournalReader(session string, start, through uint64) *journalReader {
	r := &journalReader{session: session, through: through}
	r.directReader = directReader{next: start, take: r.keep}
	return r
}

// keep decodes one message of the journal.
func (r *journalReader) keep(data []byte) error {
	if err := r.add(data); err != nil {
		return fmt.Errorf("%w: session %s, a message from stream sequence %d on: %w", engine.ErrCorrupt, r.session, r.next, err)
	}
	return nil
}

// add reads one message of the journal: a batch, or a part of one
// (parts.go).
func (r *journalReader) add(data []byte) error {
	data, err := r.parts.take(data)
	if data == nil || err != nil {
		return err
	}
	b, err := decodeBatch(data)
	if err != nil {
		return err
	}
	r.out = append(r.out, b)
	return nil
}

// batchEnd is how one request's answer ended: whether it sent any
// message, and the status that ended it.
type batchEnd struct {
	sent   bool
	status string
}

// readBatch takes one request's answer: the messages, then the end of the
// batch, whose last sequence is where the next batch starts. A 404
// (nothing from next on) or a 503 (no responders, while a stream's
// replicas restart) sends nothing, and the reader asks again or stops.
func (r *directReader) readBatch(ctx context.Context, answers <-chan *nats.Msg) (batchEnd, error) {
	timeout := time.NewTimer(apiTimeout)
	defer timeout.Stop()
	var end batchEnd
	for {
		var msg *nats.Msg
		select {
		case msg = <-answers:
		case <-timeout.C:
			return end, fmt.Errorf("%w: no answer in %s", errNoDirectAnswer, apiTimeout)
		case <-ctx.Done():
			return end, ctx.Err()
		}
		status := ""
		if msg.Header != nil {
			status = msg.Header.Get("Status")
		}
		switch status {
		case "":
			if err := r.message(msg); err != nil {
				return end, err
			}
			end.sent = true
		case "204": // the end of the batch
			last, err := strconv.ParseUint(msg.Header.Get(jetstream.LastSequenceHeader), 10, 64)
			if err != nil {
				return end, fmt.Errorf("the end of a batch without its last sequence (%q)", msg.Header.Get(jetstream.LastSequenceHeader))
			}
			if end.sent {
				r.next = last + 1
			}
			end.status = status + " " + msg.Header.Get("Description")
			return end, nil
		case "404", "503":
			end.status = status + " " + msg.Header.Get("Description")
			return end, nil
		default:
			return end, fmt.Errorf("the stream answered %s %s", status, msg.Header.Get("Description"))
		}
	}
}

// message takes one message of a batch. Its payload comes alone (no_hdr),
// or with the batch's headers from a server that has no no_hdr (2.11),
// whose sequence it then checks; a message with headers but no count of
// the messages pending after it is a server's answer to a get of one
// message, as servers before 2.11 answer a batch.
func (r *directReader) message(msg *nats.Msg) error {
	if msg.Header != nil {
		if msg.Header.Get(numPendingHeader) == "" {
			return errNoBatchGet
		}
		seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return fmt.Errorf("a message without its sequence (%q)", msg.Header.Get(jetstream.SequenceHeader))
		}
		if seq < r.next {
			return fmt.Errorf("message %d came after %d was asked for", seq, r.next)
		}
	}
	return r.take(msg.Data)
}

// numPendingHeader is a batched direct get's count of the messages after
// one that match its subject.
const numPendingHeader = "Nats-Num-Pending"

// readJournalByConsumer reads the journal as readJournal does, with an
// ordered consumer, which the stream's leader serves: for a server that
// knows no batched direct get, or replicas that did not answer one. The
// consumer is deleted once read, rather than left to its inactive
// threshold.
func (s *Store) readJournalByConsumer(ctx context.Context, session string, start, through uint64) ([]engine.Batch, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject(session)}, MaxResetAttempts: 3}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	cons, err := s.journal.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
			defer cancel()
			_ = s.js.DeleteConsumer(dctx, JournalStream, info.Name) // else it expires by itself
		}
	}()
	r := newJournalReader(session, start, through)
	for r.next <= through {
		n, err := r.fetch(ctx, cons)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("it ends at message %d, and reading stopped before it", through)
		}
	}
	return r.out, nil
}

// fetch takes up to a thousand of the consumer's messages, within
// apiTimeout, until the one at r.next-1 is past the journal's end as
// lastMsg read it; it returns how many came.
func (r *journalReader) fetch(ctx context.Context, cons jetstream.Consumer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	msgs, err := cons.Fetch(1000, jetstream.FetchContext(ctx))
	if err != nil {
		return 0, err
	}
	n := 0
	for m := range msgs.Messages() {
		n++
		meta, err := m.Metadata()
		if err != nil {
			return n, err
		}
		if err := r.add(m.Data()); err != nil {
			return n, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, r.session, meta.Sequence.Stream, err)
		}
		if r.next = meta.Sequence.Stream + 1; r.next > r.through {
			return n, nil
		}
	}
	return n, msgs.Error()
}
