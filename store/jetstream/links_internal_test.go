package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/clienttools/gateway/testlog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// requests counts the API requests on subj the store's server is asked
// for whose body match takes (nil: every one), seen by a subscriber of its
// own beside the server's.
func requests(t *testing.T, s *Store, subj string, match func(body []byte) bool) func() int64 {
	t.Helper()
	// A channel, not a handler: the connection's reader puts each message
	// in it before it reads the answer to a flush, where a handler runs
	// later, on a goroutine of its own, and a count read after the flush
	// could miss the last requests.
	seen := make(chan *nats.Msg, 1<<14)
	sub, err := s.nc.ChanSubscribe(subj, seen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var n int64
	return func() int64 {
		t.Helper()
		if err := s.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case m := <-seen:
				if match == nil || match(m.Data) {
					n++
				}
			default:
				return n
			}
		}
	}
}

// deletions counts the journal's message deletions and purges.
type deletions struct{ one, purges func() int64 }

func countDeletions(t *testing.T, s *Store) deletions {
	return deletions{
		one:    requests(t, s, "$JS.API.STREAM.MSG.DELETE."+JournalStream, nil),
		purges: requests(t, s, "$JS.API.STREAM.PURGE."+JournalStream, nil),
	}
}

// chats appends steps to the sessions in turn: a step of each, steps
// times, so that each session's journal spans the others'.
func chats(t *testing.T, s *Store, steps int, sessions ...string) {
	t.Helper()
	ctx := context.Background()
	for seq := 1; seq <= steps; seq++ {
		for _, id := range sessions {
			frame := json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d,"text":%q}`, seq, strings.Repeat(id, 20)))
			if err := s.Append(ctx, id, engine.Batch{Events: []engine.Event{{Seq: int64(seq), Type: "message", Frame: frame}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// kept checks that id's journal holds its steps whole, or, with steps 0,
// that it is gone.
func kept(t *testing.T, s *Store, id string, steps int) {
	t.Helper()
	batches, err := s.Load(context.Background(), id)
	switch {
	case steps == 0 && !errors.Is(err, engine.ErrNoSession):
		t.Errorf("%s after its deletion: %d steps, %v; want none", id, len(batches), err)
	case steps > 0 && err != nil:
		t.Errorf("%s: %v", id, err)
	case steps > 0 && len(batches) != steps:
		t.Errorf("%s has %d steps, want %d", id, len(batches), steps)
	}
}

// TestDeleteFarSpreadJournal: a chat whose journal spans more of the
// stream than a purge should read (it was used now and then while others
// were busy) is deleted message by message, by their links, and no other
// chat loses a step. A purge of its subject reads every block between its
// first message and its last, holding every chat's appends meanwhile: 0.87
// s for 4 GiB once the server had dropped its index of those blocks
// (BenchmarkDeleteLongLivedChat).
func TestDeleteFarSpreadJournal(t *testing.T) {
	s, ctx := openForLoad(t)
	s.farBytes = 1 // any span is far
	chats(t, s, 30, "far", "busy1", "busy2")
	counted := countDeletions(t, s)
	if err := s.Delete(ctx, "far"); err != nil {
		t.Fatal(err)
	}
	if n := counted.one(); n != 30 {
		t.Errorf("%d messages deleted one by one, want the chat's 30", n)
	}
	kept(t, s, "far", 0)
	kept(t, s, "busy1", 30)
	kept(t, s, "busy2", 30)
	// Appended to again (a node that had it in memory), it starts anew.
	chats(t, s, 1, "far")
	kept(t, s, "far", 1)
}

// TestDeleteNearJournal: on a stream that holds less than farBytes (so no
// journal in it spans far), a chat is purged, one request, as before.
func TestDeleteNearJournal(t *testing.T) {
	s, ctx := openForLoad(t)
	chats(t, s, 30, "near", "busy")
	counted := countDeletions(t, s)
	if err := s.Delete(ctx, "near"); err != nil {
		t.Fatal(err)
	}
	if one, purges := counted.one(), counted.purges(); one != 0 || purges != 1 {
		t.Errorf("%d messages deleted one by one and %d purges, want a purge alone", one, purges)
	}
	kept(t, s, "near", 0)
	kept(t, s, "busy", 30)
}

// TestDeleteJournalPastAnUnlinkedMessage: a journal with a message that
// names no message before it (published by hand, without the header that
// every append of the store's sets) is deleted whole all the same: its
// first message, those after the unlinked one by their links, the rest by
// the purge.
func TestDeleteJournalPastAnUnlinkedMessage(t *testing.T) {
	s, ctx := openForLoad(t)
	s.farBytes = 1
	chats(t, s, 10, "far", "busy")
	// A step published by hand: no link.
	last, err := s.journal.GetLastMsgForSubject(ctx, subject("far"))
	if err != nil {
		t.Fatal(err)
	}
	copied := strings.Replace(string(last.Data), `"seq":10`, `"seq":11`, 1)
	copied = strings.Replace(copied, `"q":10`, `"q":11`, 1)
	if _, err := s.js.Publish(ctx, subject("far"), []byte(copied)); err != nil {
		t.Fatal(err)
	}
	s.forgetSession("far") // its head: the journal moved on without this store
	chats(t, s, 10, "busy2")
	if err := s.Append(ctx, "far", engine.Batch{Events: []engine.Event{{Seq: 12, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":12}`)}}}); err != nil {
		t.Fatal(err)
	}
	kept(t, s, "far", 12)
	counted := countDeletions(t, s)
	if err := s.Delete(ctx, "far"); err != nil {
		t.Fatal(err)
	}
	if n := counted.one(); n != 3 {
		t.Errorf("%d messages deleted one by one, want 3: the journal's first, the unlinked message and the one after it", n)
	}
	kept(t, s, "far", 0)
	kept(t, s, "busy", 10)
	kept(t, s, "busy2", 10)
}

// TestDeleteMessagesRefused: a NATS user that may not delete the journal's
// messages one by one (deploy.md grants it) has its chats purged whole,
// the refusal said once, and seen at once rather than after a timeout.
func TestDeleteMessagesRefused(t *testing.T) {
	ctx := context.Background()
	base := natstest.Server(t, []*server.User{{Username: "node", Password: "n",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.MSG.DELETE.>"}}}}})
	var logs testlog.Buffer
	s, err := Open(ctx, Options{URL: strings.Replace(base, "nats://", "nats://node:n@", 1), Node: "n1", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.farBytes = 1
	for _, id := range []string{"far1", "far2", "busy"} {
		if _, err := s.Own(ctx, id, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	chats(t, s, 10, "far1", "far2", "busy")
	for _, id := range []string{"far1", "far2"} {
		start := time.Now()
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took >= apiTimeout {
			t.Errorf("deleting %s took %v, a request's timeout: the refusal was not seen", id, took)
		}
		kept(t, s, id, 0)
	}
	kept(t, s, "busy", 10)
	if n := strings.Count(logs.String(), "may not delete the journal's messages one by one"); n != 1 {
		t.Errorf("the refusal was said %d times, want once:\n%s", n, logs.String())
	}
}

// TestLoadFarSpreadJournal: a chat whose journal spans far is read by its
// links, a message a request and no batched read, and reads as the batched
// read does: every step whole and in order, one stored in parts included.
func TestLoadFarSpreadJournal(t *testing.T) {
	ctx := context.Background()
	s := openSmall(t)
	for _, id := range []string{"far", "busy"} {
		if _, err := s.Own(ctx, id, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	chats(t, s, 5, "far", "busy")
	big := engine.Batch{Events: []engine.Event{bigEvent(6, 150<<10)}, State: json.RawMessage(`{"v":6}`)}
	if err := s.Append(ctx, "far", big); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "far", engine.Batch{Events: []engine.Event{bigEvent(7, 10)}}); err != nil {
		t.Fatal(err)
	}
	batched, err := s.Load(ctx, "far")
	if err != nil {
		t.Fatal(err)
	}
	s.farBytes = 1 // any span is far
	s.rate = journalRate{}
	batchedReads := requests(t, s, directGetPrefix+JournalStream, func(body []byte) bool { return strings.Contains(string(body), `"batch"`) })
	reads := requests(t, s, directGetPrefix+JournalStream, nil)
	byLinks, err := s.Load(ctx, "far")
	if err != nil {
		t.Fatal(err)
	}
	if len(byLinks) != 7 || fmt.Sprint(byLinks) != fmt.Sprint(batched) {
		t.Errorf("read by its links: %d steps, want the batched read's %d:\n%.300v\n%.300v", len(byLinks), len(batched), byLinks, batched)
	}
	info, err := s.journal.Info(ctx, jetstream.WithSubjectFilter(subject("far")))
	if err != nil {
		t.Fatal(err)
	}
	// Its first, then each from the one before its last to the one after
	// its first: its last is the load's read of it by subject, a request
	// of another name, and is not read again.
	if n, want := reads(), int64(info.State.Subjects[subject("far")])-1; batchedReads() != 0 || n != want {
		t.Errorf("%d reads, %d of them batched; want %d: its first, then each from the one before its last", n, batchedReads(), want)
	}
	// From a batch in its middle (a replay's read), by its links too, from
	// the batch that holds the event: the one in parts, or the last alone.
	for _, tc := range []struct {
		from  int64
		steps int
	}{{4, 4}, {6, 2}, {7, 1}} {
		before := reads()
		got, err := s.LoadFrom(ctx, "far", tc.from)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.steps || fmt.Sprint(got) != fmt.Sprint(batched[len(batched)-tc.steps:]) {
			t.Errorf("LoadFrom %d by links: %d steps, want the last %d:\n%.300v", tc.from, len(got), tc.steps, got)
		}
		if tc.from == 7 && reads()-before != 1 {
			t.Errorf("LoadFrom 7 took %d reads, want 1: the journal's first message (its last, which holds event 7, is read by subject)", reads()-before)
		}
		if batchedReads() != 0 {
			t.Errorf("LoadFrom %d made %d batched reads: a search of the journal's middle", tc.from, batchedReads())
		}
	}
}

// TestLoadNearJournalOnALargeStream: on a stream that holds more than
// farBytes, a chat whose steps came close together is still read in
// batches, after one look at its first message: most loads are of such
// chats, and a read by links costs a request a message.
func TestLoadNearJournalOnALargeStream(t *testing.T) {
	s, ctx := openForLoad(t)
	chats(t, s, 40, "busy1", "busy2")
	chats(t, s, 5, "near")
	info, err := s.journal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Halfway between what the near chat spans, judged as farFirst judges
	// it (its time at the stream's mean rate), and the whole stream: the
	// chat is near, and the stream holds more than farBytes, however
	// slowly this machine appended.
	first, err := s.journal.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject("near")))
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.journal.GetLastMsgForSubject(ctx, subject("near"))
	if err != nil {
		t.Fatal(err)
	}
	st := info.State
	spanned := float64(st.Bytes) * last.Time.Sub(first.Time).Seconds() / max(st.LastTime.Sub(st.FirstTime).Seconds(), 1)
	s.farBytes = uint64((spanned + float64(st.Bytes)) / 2)
	batchedReads := requests(t, s, directGetPrefix+JournalStream, func(body []byte) bool { return strings.Contains(string(body), `"batch"`) })
	reads := requests(t, s, directGetPrefix+JournalStream, nil)
	kept(t, s, "near", 5)
	if b, n := batchedReads(), reads(); b == 0 || n-b != 1 {
		t.Errorf("%d reads, %d of them batched; want batched reads after one look at its first message", n, b)
	}
}

// forgedStream is the journal's stream with hooks: forge changes each
// message GetMsg reads (a link as no server of ours stores one), and
// deleted runs after each DeleteMsg.
type forgedStream struct {
	jetstream.Stream
	forge   func(m *jetstream.RawStreamMsg)
	deleted func(n int)
	// failFrom: GetMsg fails from its failFrom-th call on (0: never), as
	// a walk's reads do once its time is up.
	failFrom int64
	gets     atomic.Int64
	deletes  int
}

func (f *forgedStream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	if n := f.gets.Add(1); f.failFrom > 0 && n >= f.failFrom {
		return nil, context.DeadlineExceeded
	}
	m, err := f.Stream.GetMsg(ctx, seq, opts...)
	if err == nil && f.forge != nil {
		f.forge(m)
	}
	return m, err
}

func (f *forgedStream) DeleteMsg(ctx context.Context, seq uint64) error {
	err := f.Stream.DeleteMsg(ctx, seq)
	f.deletes++
	if f.deleted != nil {
		f.deleted(f.deletes)
	}
	return err
}

// seqsOf returns the stream sequences of id's journal, first to last.
func seqsOf(t *testing.T, s *Store, id string) []uint64 {
	t.Helper()
	var seqs []uint64
	for seq := uint64(1); ; seq++ {
		m, err := s.journal.GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(subject(id)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return seqs
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.Sequence)
		seq = m.Sequence
	}
}

// TestDeletionCutShortLeavesNoChat: a deletion by links that stops part
// way (its context ends: a sweep out of time, a shutdown; or its purge
// fails, or the process dies) leaves no chat to load. Deleted from its
// last message back, it left the chat's first steps, which a load
// returned as the chat, and the chat went on from there, numbering again
// events its pages had. The load finds what is left, deletes it and its
// summary, and answers that there is no such session.
func TestDeletionCutShortLeavesNoChat(t *testing.T) {
	s, _ := openForLoad(t)
	s.farBytes = 1 // any span is far
	chats(t, s, 30, "far", "busy")
	if err := s.Summarize(context.Background(), engine.Summary{ID: "far", Owner: "ada", Title: "far", Created: time.Now(), Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.journal = &forgedStream{Stream: s.journal, deleted: func(n int) {
		if n == 10 {
			cancel()
		}
	}}
	if err := s.Delete(ctx, "far"); err == nil {
		t.Fatal("a deletion whose context ended part way reported none")
	}
	if left := len(seqsOf(t, s, "far")); left == 0 || left == 30 {
		t.Fatalf("%d of the chat's 30 messages left: the deletion was not cut short part way, and the test tries nothing", left)
	}
	if got, err := s.Load(context.Background(), "far"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("a load after a deletion cut short: %d steps, %v; want ErrNoSession", len(got), err)
	}
	if left := seqsOf(t, s, "far"); len(left) > 0 {
		t.Errorf("the load left %d of the chat's messages", len(left))
	}
	sums, err := s.Summaries(context.Background(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) > 0 {
		t.Errorf("the chat is still listed: %+v", sums)
	}
	kept(t, s, "busy", 30)
}

// TestWalkStaysInItsChat: a link that names another chat's message, or
// one that does not go back, ends the walk by links: the load reads the
// chat whole in batches, at once, and a deletion deletes no other chat's
// message. No server of ours stores such links (it checks the one each
// append gives); the walk must not trust them all the same.
func TestWalkStaysInItsChat(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(far, busy []uint64) uint64 // what far's 11th message links to
	}{
		{"a link to another chat's message", func(_, busy []uint64) uint64 { return busy[9] }},
		{"a link to itself", func(far, _ []uint64) uint64 { return far[10] }},
		{"a link forward", func(far, _ []uint64) uint64 { return far[12] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx := openForLoad(t)
			s.farBytes = 1
			chats(t, s, 20, "far", "busy")
			far, busy := seqsOf(t, s, "far"), seqsOf(t, s, "busy")
			to := strconv.FormatUint(tc.link(far, busy), 10)
			forged := &forgedStream{Stream: s.journal, forge: func(m *jetstream.RawStreamMsg) {
				if m.Sequence == far[10] {
					m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, to)
				}
			}}
			s.journal = forged
			kept(t, s, "far", 20)
			// The walk gives up where it meets the link: the last nine
			// messages, the forged one, maybe the one it names, the look
			// at the first. A walk round reads until its time is up.
			if n := forged.gets.Load(); n > 13 {
				t.Errorf("the load read %d messages one by one; want it to give up at the forged link", n)
			}
			if err := s.Delete(ctx, "far"); err != nil {
				t.Fatal(err)
			}
			kept(t, s, "far", 0)
			kept(t, s, "busy", 20)
		})
	}
}

// TestLoadKeepsWhatTheWalkRead: a walk by links that stops short of the
// journal's start (out of its time, a message a replica behind has not
// got) keeps what it read, and the read in batches reads the rest: before
// it threw that away and read the whole journal again, so a far-spread
// chat longer than a walk's 5 s paid them at every load, then the whole
// read. The batches of that read that go past where the walk stopped
// (one is not bounded by a sequence) are not taken twice.
func TestLoadKeepsWhatTheWalkRead(t *testing.T) {
	defer func(b int) { loadBatch = b }(loadBatch)
	loadBatch = 4
	s, _ := openForLoad(t)
	s.farBytes = 1
	chats(t, s, 30, "far", "busy")
	batched := requests(t, s, directGetPrefix+JournalStream, func(body []byte) bool { return strings.Contains(string(body), `"batch"`) })
	// Load's look at the first message, then nine of the walk's reads
	// (steps 29 to 21; the last, 30, came with the journal's end): the
	// tenth fails.
	s.journal = &forgedStream{Stream: s.journal, failFrom: 11}
	got, err := s.Load(context.Background(), "far")
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if len(b.Events) != 1 || b.Events[0].Seq != int64(i+1) {
			t.Fatalf("step %d of the load: %+v; want event %d alone", i+1, b.Events, i+1)
		}
	}
	if len(got) != 30 {
		t.Fatalf("loaded %d steps, want 30", len(got))
	}
	// Steps 1 to 20 in batches of 4, and one batch past them; the whole
	// journal would take 8.
	if n := batched(); n > 6 {
		t.Errorf("%d batched reads; want at most 6, for the 20 steps the walk did not read", n)
	}
}
