package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// smallMessages is the max_payload of the NATS server of the tests below:
// a batch of a few hundred KiB goes in parts.
const smallMessages = 64 << 10

// openSmall opens a store on a NATS server that takes messages of at most
// smallMessages bytes.
func openSmall(t *testing.T) *Store {
	t.Helper()
	url := natstest.Start(t, func(o *server.Options) { o.MaxPayload = smallMessages })
	s, err := Open(context.Background(), Options{URL: url, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestNATSTestServersTakeTheJournalsMessages: natstest's servers take the
// journal's largest message, as deploy.md asks of a cluster's.
func TestNATSTestServersTakeTheJournalsMessages(t *testing.T) {
	if natstest.MaxPayload != MaxMessage {
		t.Errorf("natstest.MaxPayload is %d, MaxMessage %d", natstest.MaxPayload, MaxMessage)
	}
}

// TestReadPart: a part's line is read, or refused naming what is wrong;
// a batch's JSON is no part.
func TestReadPart(t *testing.T) {
	tests := []struct {
		data  string
		want  part
		isErr bool
	}{
		{"~part 1/3 abc\n{\"e\":", part{set: "abc", index: 1, count: 3, piece: []byte(`{"e":`)}, false},
		{"~part 3/3 abc\n", part{set: "abc", index: 3, count: 3, piece: []byte{}}, false},
		{"~part 4/3 abc\nx", part{}, true},
		{"~part 0/3 abc\nx", part{}, true},
		{"~part 1/3\nx", part{}, true},
		{"~part 1/3 a b\nx", part{}, true},
		{"~part a/3 abc\nx", part{}, true},
		{"~part 1/3 abc", part{}, true},
		{"~part ", part{}, true},
	}
	for _, tc := range tests {
		p, ok, err := readPart([]byte(tc.data))
		if !ok || (err != nil) != tc.isErr || p.set != tc.want.set || p.index != tc.want.index || p.count != tc.want.count || string(p.piece) != string(tc.want.piece) {
			t.Errorf("readPart(%q) = %+v, %v, %v; want %+v, error %v", tc.data, p, ok, err, tc.want, tc.isErr)
		}
	}
	if _, ok, err := readPart([]byte(`{"e":[]}`)); ok || err != nil {
		t.Errorf("a batch read as a part: %v, %v", ok, err)
	}
}

// TestJoiner: parts join into their batch in order; a set that stopped
// short is dropped by what follows it; a part that continues no set is
// refused.
func TestJoiner(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 50))
	const limit = 200
	cut := func(set string) [][]byte {
		n := partCount(data, limit, set)
		var out [][]byte
		for i := 1; i <= n; i++ {
			out = append(out, appendPart(nil, data, limit, set, i, n))
		}
		return out
	}
	a, b := cut("a"), cut("b")
	if len(a) < 3 {
		t.Fatalf("%d parts; the test wants 3 or more", len(a))
	}
	for _, p := range a {
		if len(p) > limit {
			t.Fatalf("a part of %d bytes, over the limit %d", len(p), limit)
		}
	}
	tests := []struct {
		name    string
		msgs    [][]byte
		want    []string // what take returns, message by message ("" for nil)
		wantErr bool
	}{
		{"a set", a, append(make([]string, len(a)-1), string(data)), false},
		{"a set stopped short, then a batch", [][]byte{a[0], a[1], []byte(`{}`)}, []string{"", "", "{}"}, false},
		{"a set stopped short, then another", append([][]byte{a[0]}, b...), append(make([]string, len(b)), string(data)), false},
		{"a part out of its set", [][]byte{a[0], b[1]}, []string{""}, true},
		{"a part with no set before it", [][]byte{a[1]}, nil, true},
		{"a part twice", [][]byte{a[0], a[0], a[1], a[1]}, []string{"", "", ""}, true},
		{"a count past any batch", [][]byte{[]byte("~part 1/2305843009213693952 x\nabcd"), []byte(`{}`)}, []string{"", "{}"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var j joiner
			var got []string
			for _, m := range tc.msgs {
				out, err := j.take(m)
				if err != nil {
					if !tc.wantErr {
						t.Fatalf("take: %v", err)
					}
					break
				}
				got = append(got, string(out))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("took %q, want %q", got, tc.want)
			}
		})
	}
}

// bigEvent is an event of about size bytes.
func bigEvent(seq int64, size int) engine.Event {
	return engine.Event{Seq: seq, Type: "tool.finished", Frame: json.RawMessage(fmt.Sprintf(`{"type":"tool.finished","seq":%d,"text":%q}`, seq, strings.Repeat(string(rune('a'+seq)), size)))}
}

// TestAppendInParts: a batch larger than the NATS server's messages is
// stored in parts and read back whole, between whole batches; the journal's
// stream says it holds parts from then on.
func TestAppendInParts(t *testing.T) {
	ctx := context.Background()
	s := openSmall(t)
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	batches := []engine.Batch{
		{Events: []engine.Event{bigEvent(1, 10)}},
		{Events: []engine.Event{bigEvent(2, 150<<10), bigEvent(3, 100<<10)}, State: json.RawMessage(`{"v":1}`)},
		{State: json.RawMessage(fmt.Sprintf(`{"v":%q}`, strings.Repeat("s", 200<<10)))},
		{Events: []engine.Event{bigEvent(4, 10)}, State: json.RawMessage(`{"v":2}`)},
	}
	for i, b := range batches {
		if err := s.Append(ctx, "s1", b); err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
	}
	got, err := s.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(batches) {
		t.Fatalf("Load: %d batches, want %d", len(got), len(batches))
	}
	for i := range got {
		if show(got[i]) != show(batches[i]) {
			t.Errorf("batch %d came back another", i+1)
		}
	}
	info, err := s.journal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := info.Config.Metadata[formatKey]; f != "2" {
		t.Errorf("the journal's format after a batch in parts: %q, want 2", f)
	}
	// A node that starts on it reads it too, from the end it finds.
	s2, err := Open(ctx, Options{URL: s.nc.ConnectedUrl(), Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Append(ctx, "s1", engine.Batch{Events: []engine.Event{bigEvent(5, 10)}}); err != nil {
		t.Fatalf("another node's append after the parts: %v", err)
	}
	if n := len(journal(t, s2, "s1")); n != 5 {
		t.Errorf("another node reads %d events, want 5", n)
	}
}

// show is a batch in a line: its events' seqs and sizes, and its state's.
func show(b engine.Batch) string {
	var out strings.Builder
	for _, ev := range b.Events {
		fmt.Fprintf(&out, "%d/%s/%d/%x ", ev.Seq, ev.Type, len(ev.Frame), ev.Frame[len(ev.Frame)-8:])
	}
	fmt.Fprintf(&out, "state %d %.20s", len(b.State), b.State)
	return out.String()
}

// handParts is a batch cut into parts as the store cuts it, for a test to
// publish behind the store's back (a try of this node's, or another
// writer's).
type handParts struct {
	s     *Store
	data  []byte
	limit int
	set   string
	count int
}

func cutBatch(t *testing.T, s *Store, b engine.Batch, set string) handParts {
	t.Helper()
	data, err := encodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	limit := s.messageLimit()
	return handParts{s: s, data: data, limit: limit, set: set, count: partCount(data, limit, set)}
}

// land publishes parts from to to (from 1) on session's subject, the first
// fenced on the message at stream sequence after, and returns the last's.
func (p handParts) land(t *testing.T, session string, from, to int, after uint64) uint64 {
	t.Helper()
	for i := from; i <= to; i++ {
		var err error
		if after, err = p.s.publish(context.Background(), subject(session), appendPart(nil, p.data, p.limit, p.set, i, p.count), after); err != nil {
			t.Fatalf("part %d of %d: %v", i, p.count, err)
		}
	}
	return after
}

// TestAppendAfterATryInParts: as TestAppendAfterATryThatLandedLate, for a
// batch in parts. This node's try that stopped part way, or landed whole
// after it was given up, is its own: the retry goes on from it, and the
// journal holds the batch once. Another writer's parts are refused as its
// whole batch would be, except a set that stopped short when the node reads
// the journal's end itself: that writer died, its batch is not in the
// journal, and the session goes on after it.
func TestAppendAfterATryInParts(t *testing.T) {
	small := bigEvent(1, 10)
	big := engine.Batch{Events: []engine.Event{bigEvent(2, 150<<10)}, State: json.RawMessage(`{"v":1}`)}
	delta := engine.Batch{Events: []engine.Event{bigEvent(2, 150<<10)}}
	withStep := engine.Batch{Events: []engine.Event{bigEvent(2, 150<<10), bigEvent(3, 10)}, State: json.RawMessage(`{"v":1}`)}
	other := engine.Batch{Events: []engine.Event{bigEvent(2, 160<<10)}, State: json.RawMessage(`{"v":9}`)}
	tests := []struct {
		name    string
		landed  engine.Batch // in parts, behind the store's back, after event 1
		parts   int          // of them that landed; 0: all
		theirs  bool         // the parts are another writer's
		forget  bool         // the store reads the journal's end itself
		retry   engine.Batch
		wantErr error
		want    []int64 // the journal's events after the retry
	}{
		{"its try stopped part way", big, 1, false, false, big, nil, []int64{1, 2}},
		{"its try stopped part way, end read", big, 2, false, true, big, nil, []int64{1, 2}},
		{"its try landed whole", big, 0, false, false, big, nil, []int64{1, 2}},
		{"its try landed whole, end read", big, 0, false, true, big, nil, []int64{1, 2}},
		{"its delta landed, then the retry with the step after it", delta, 0, false, false, withStep, nil, []int64{1, 2, 3}},
		{"another writer's parts, stopped part way", other, 1, true, false, big, ErrFenced, []int64{1}},
		{"another writer's parts, stopped part way, end read", other, 1, true, true, big, nil, []int64{1, 2}},
		{"another writer's batch in parts", other, 0, true, false, big, ErrFenced, []int64{1, 2}},
		{"another writer's batch in parts, end read", other, 0, true, true, big, ErrFenced, []int64{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openSmall(t)
			if _, err := s.Own(ctx, "s1", func() {}); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{small}}); err != nil {
				t.Fatal(err)
			}
			h, _ := s.headOf(ctx, "s1")
			set := "theirs"
			if !tc.theirs {
				// As this store names a try's parts (publishParts).
				set = "mine"
				s.splits["s1"] = splitTry{after: h.seq, set: set}
			}
			landed := cutBatch(t, s, tc.landed, set)
			if landed.count < 3 {
				t.Fatalf("%d parts; the test wants 3 or more", landed.count)
			}
			upTo := landed.count
			if tc.parts > 0 {
				upTo = tc.parts
			}
			landed.land(t, "s1", 1, upTo, h.stream)
			if tc.forget {
				s.forgetHead("s1")
			}
			err := s.Append(ctx, "s1", tc.retry)
			if tc.wantErr == nil && err != nil || !errors.Is(err, tc.wantErr) {
				t.Fatalf("the retry: %v, want %v", err, tc.wantErr)
			}
			if got := journalSeqs(t, s, "s1"); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("journal's events %v, want %v", got, tc.want)
			}
			if err != nil {
				return
			}
			// And the session goes on after it.
			next := bigEvent(int64(len(tc.want)+1), 200<<10)
			if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{next}}); err != nil {
				t.Fatalf("the append after: %v", err)
			}
			if n := len(journal(t, s, "s1")); n != len(tc.want)+1 {
				t.Errorf("%d events after the next append, want %d", n, len(tc.want)+1)
			}
		})
	}
}

// FuzzParts: any data cut into parts of any size joins back the same, and
// readPart reads any message without a panic.
func FuzzParts(f *testing.F) {
	f.Add([]byte(`{"e":[{"q":1,"t":"message","f":{}}]}`), 80, "set")
	f.Add([]byte("~part 1/2 x\n"), 60, "a")
	f.Fuzz(func(t *testing.T, data []byte, limit int, set string) {
		_, _, _ = readPart(data)
		if limit < 1 || limit > 1<<16 || set == "" || strings.ContainsAny(set, " \n") || len(data) == 0 {
			return
		}
		n := partCount(data, limit, set)
		var j joiner
		for i := 1; i <= n; i++ {
			out, err := j.take(appendPart(nil, data, limit, set, i, n))
			switch {
			case err != nil:
				t.Fatalf("part %d of %d: %v", i, n, err)
			case i < n && out != nil:
				t.Fatalf("part %d of %d ended the set", i, n)
			case i == n && string(out) != string(data):
				t.Fatalf("joined %q, want %q", out, data)
			}
		}
	})
}

// lateLastPart is a journal whose end, once read, has the last part of an
// earlier try land after it: that try's publish timed out while NATS was
// away, and the client sends it once NATS is back, while the engine's
// retry of the same step is under way.
type lateLastPart struct {
	jetstream.Stream
	land func() // once, after the first read of a part at the end
}

func (l *lateLastPart) GetLastMsgForSubject(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	m, err := l.Stream.GetLastMsgForSubject(ctx, subj)
	if land := l.land; err == nil && land != nil && isPart(m.Data) {
		l.land = nil
		land()
	}
	return m, err
}

// TestAppendWhileItsEarlierTryLands: the last part of a try that was
// given up lands while the retry looks at the journal's end. The retry
// finds its own step stored, and the journal holds it once: before, the
// retry's own publish was refused and the session fenced (it left memory,
// and what waited on the step was told it was not stored).
func TestAppendWhileItsEarlierTryLands(t *testing.T) {
	ctx := context.Background()
	s := openSmall(t)
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{bigEvent(1, 10)}}); err != nil {
		t.Fatal(err)
	}
	big := engine.Batch{Events: []engine.Event{bigEvent(2, 150<<10)}, State: json.RawMessage(`{"v":1}`)}
	h, _ := s.headOf(ctx, "s1")
	s.splits["s1"] = splitTry{after: h.seq, set: "mine"}
	parts := cutBatch(t, s, big, "mine")
	last := parts.land(t, "s1", 1, parts.count-1, h.stream) // the last part is on its way
	s.journal = &lateLastPart{Stream: s.journal, land: func() { parts.land(t, "s1", parts.count, parts.count, last) }}
	if err := s.Append(ctx, "s1", big); err != nil {
		t.Fatalf("the retry: %v, want the step taken", err)
	}
	if got := journalSeqs(t, s, "s1"); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("journal's events %v, want [1 2]", got)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{bigEvent(3, 10)}}); err != nil {
		t.Fatalf("the append after: %v", err)
	}
}

// failingInfo is a journal whose stream info fails while fail is set.
type failingInfo struct {
	jetstream.Stream
	fail bool
}

func (f *failingInfo) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	if f.fail {
		return nil, context.DeadlineExceeded
	}
	return f.Stream.Info(ctx, opts...)
}

// TestFormatMarkedAfterAFailure: a node that could not mark the journal as
// holding parts (NATS away a moment) marks it at a later step in parts, a
// minute on; meanwhile the steps are stored all the same.
func TestFormatMarkedAfterAFailure(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	url := natstest.Start(t, func(o *server.Options) { o.MaxPayload = smallMessages })
	s, err := Open(ctx, Options{URL: url, Node: "n1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	journalStream := s.journal
	format := func() string {
		t.Helper()
		info, err := journalStream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.Metadata[formatKey]
	}
	big := func(session string) {
		t.Helper()
		if err := s.Append(ctx, session, engine.Batch{Events: []engine.Event{bigEvent(1, 200<<10)}}); err != nil {
			t.Fatalf("a step in parts: %v", err)
		}
	}
	s.journal = &failingInfo{Stream: journalStream, fail: true}
	big("s1")
	if f := format(); f != "1" {
		t.Fatalf("format %q after a failed mark, want 1", f)
	}
	s.journal.(*failingInfo).fail = false
	big("s2")
	if f := format(); f != "1" {
		t.Errorf("format %q: marked again within the minute", f)
	}
	clk.Advance(time.Minute)
	big("s3")
	if f := format(); f != "2" {
		t.Errorf("format %q a minute on, at a step in parts; want 2", f)
	}
}

// TestPartsStopWhenTheLeaseLapses: a node whose lease lapses while it
// stores a step in parts (a set takes a round trip a part) stores no more
// of it: the set stops short, and the journal holds no half step.
func TestPartsStopWhenTheLeaseLapses(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	url := natstest.Start(t, func(o *server.Options) { o.MaxPayload = smallMessages })
	const ttl = time.Minute // renewed every 20 s of real time: not in this test
	s, err := Open(ctx, Options{URL: url, Node: "n1", Clock: clk, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{bigEvent(1, 10)}}); err != nil {
		t.Fatal(err)
	}
	parts := 0
	afterPart = func(int) {
		if parts++; parts == 1 {
			clk.Advance(2 * ttl)
		}
	}
	defer func() { afterPart = nil }()
	err = s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{bigEvent(2, 300<<10)}, State: json.RawMessage(`{"v":1}`)})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the step in parts: %v, want ErrFenced", err)
	}
	if parts != 1 {
		t.Errorf("%d parts stored, want 1: the lease had lapsed", parts)
	}
	if events := journal(t, s, "s1"); len(events) != 1 {
		t.Errorf("the journal holds %d events, want 1", len(events))
	}
}
