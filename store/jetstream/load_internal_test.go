package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go"
)

// openForLoad opens a store on an embedded server, and a context that
// bounds the test.
func openForLoad(t *testing.T) (*Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, ctx
}

// A load reads the whole journal, in order, in as many requests as its
// batches need: cut by their count, by their bytes, or by neither; and
// it leaves nothing on the server (an ordered consumer stayed five
// minutes after each load, with its goroutines).
func TestLoadReadsTheJournalInBatches(t *testing.T) {
	s, ctx := openForLoad(t)
	const steps = 25
	var want []engine.Batch
	for i := int64(1); i <= steps; i++ {
		b := engine.Batch{Events: []engine.Event{{Seq: i, Type: "model.delta",
			Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":"part %d"}`, i, i))}}}
		if i%5 == 0 {
			b.State = json.RawMessage(fmt.Sprintf(`{"step":%d}`, i))
		}
		if err := s.Append(ctx, "long", b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
		// Another session's journal between each of its messages: stream
		// sequences are not the journal's positions.
		other := engine.Event{Seq: i, Type: "message", Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, i))}
		if err := s.Append(ctx, "other", engine.Batch{Events: []engine.Event{other}}); err != nil {
			t.Fatal(err)
		}
	}
	requests := watchDirectGets(t, s, JournalStream)
	for _, tc := range []struct {
		name         string
		batch, bytes int
		requests     int
	}{
		{"one request", 1000, 16 << 20, 1},
		{"by count", 4, 16 << 20, 7},
		{"a message a request, by bytes", 1000, 1, steps},
		{"count equal to the journal", steps, 16 << 20, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b, n int) { loadBatch, loadBatchBytes = b, n }(loadBatch, loadBatchBytes)
			loadBatch, loadBatchBytes = tc.batch, tc.bytes
			got, err := s.Load(ctx, "long")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("loaded %d batches, want %d", len(got), len(want))
			}
			for i := range want {
				if g, w := got[i], want[i]; len(g.Events) != 1 || g.Events[0].Seq != w.Events[0].Seq ||
					string(g.Events[0].Frame) != string(w.Events[0].Frame) || string(g.State) != string(w.State) {
					t.Fatalf("batch %d: got %+v, want %+v", i, g, w)
				}
			}
			// And one more: Load's look at the journal's first message
			// (whether a deletion took its start).
			if n := requests(); n != tc.requests+1 {
				t.Errorf("%d requests, want %d: %d batched and the look at its first message", n, tc.requests+1, tc.requests)
			}
		})
	}
	if s.noBatchGet.Load() {
		t.Error("the embedded server was taken for one that knows no batched direct get")
	}
	// A server that knows no batched direct get is read with a consumer:
	// the same journal, and the consumer deleted once read.
	last, err := s.lastMsg(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	byConsumer, err := s.readJournalByConsumer(ctx, "long", 1, last.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if len(byConsumer) != len(want) || string(byConsumer[steps-1].State) != string(want[steps-1].State) {
		t.Errorf("read with a consumer: %d batches; want %d", len(byConsumer), len(want))
	}
	// Once the server is taken for one before 2.11, Load reads that way,
	// and makes no batched direct get: its one direct get is its look at
	// the journal's first message.
	s.noBatchGet.Store(true)
	loaded, err := s.Load(ctx, "long")
	s.noBatchGet.Store(false)
	if err != nil || len(loaded) != len(want) || string(loaded[steps-1].State) != string(want[steps-1].State) {
		t.Errorf("Load with a server before 2.11: %d batches, %v; want %d", len(loaded), err, len(want))
	}
	if n := requests(); n != 1 {
		t.Errorf("Load made %d direct gets of a server taken for one before 2.11, want 1: the look at the journal's first message", n)
	}
	// Load deletes the consumer it read with; an ordered consumer that
	// fetched more than once made a new one for each fetch, and deletes
	// the one before in a goroutine of its own (nats.go's reset): they go
	// soon after, not by the time Load returns.
	waitFor(t, "the journal to have no consumers after the loads", func() bool {
		info, err := s.journal.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers == 0
	})
}

// A replica behind the journal's end answers with less; the read asks
// again, then says so, and Load reads with a consumer instead.
func TestReadJournalShortOfItsEnd(t *testing.T) {
	s, ctx := openForLoad(t)
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	defer func(w time.Duration) { replicaRetryWait = w }(replicaRetryWait)
	replicaRetryWait = time.Millisecond
	last, err := s.lastMsg(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// As if lastMsg had read a journal five messages longer than the
	// replica that answers.
	if _, err := s.readJournal(ctx, "s1", 1, last.Sequence+5); !errors.Is(err, errNoDirectAnswer) {
		t.Errorf("readJournal past the end = %v, want errNoDirectAnswer", err)
	}
}

// Each answer a direct get may bring, as the reader takes it.
func TestReadBatchAnswers(t *testing.T) {
	payload := func(seq int) *nats.Msg {
		return &nats.Msg{Data: fmt.Appendf(nil, `{"e":[{"q":%d,"t":"message","f":{"seq":%d}}]}`, seq, seq)}
	}
	headed := func(seq, pending int) *nats.Msg { // a batch's message with its headers (2.11)
		m := payload(seq)
		m.Header = nats.Header{"Nats-Stream": {JournalStream}, "Nats-Sequence": {fmt.Sprint(seq * 10)}, numPendingHeader: {fmt.Sprint(pending)}}
		return m
	}
	status := func(code, desc string, last int) *nats.Msg {
		return &nats.Msg{Header: nats.Header{"Status": {code}, "Description": {desc}, numPendingHeader: {"0"}, "Nats-Last-Sequence": {fmt.Sprint(last)}}}
	}
	for _, tc := range []struct {
		name    string
		answers []*nats.Msg
		sent    bool
		read    int
		next    uint64
		err     error
	}{
		{"payloads and the end", []*nats.Msg{payload(1), payload(2), status("204", "EOB", 70)}, true, 2, 71, nil},
		{"with headers (2.11)", []*nats.Msg{headed(1, 1), headed(2, 0), status("204", "EOB", 20)}, true, 2, 21, nil},
		{"nothing from there on", []*nats.Msg{status("404", "Message Not Found", 0)}, false, 0, 1, nil},
		{"no responders", []*nats.Msg{status("503", "", 0)}, false, 0, 1, nil},
		{"a server before 2.11", []*nats.Msg{{Header: nats.Header{"Nats-Stream": {JournalStream}, "Nats-Sequence": {"3"}}, Data: []byte(`{}`)}}, false, 0, 1, errNoBatchGet},
		{"not JSON", []*nats.Msg{{Data: []byte(`{"e":`)}}, false, 0, 1, engine.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := make(chan *nats.Msg, len(tc.answers))
			for _, a := range tc.answers {
				answers <- a
			}
			r := newJournalReader("s", 1, 0)
			end, err := r.readBatch(context.Background(), answers)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("readBatch = %v, want %v", err, tc.err)
			}
			if end.sent != tc.sent || len(r.out) != tc.read || r.next != tc.next {
				t.Errorf("sent %v, read %d, next %d; want %v, %d, %d", end.sent, len(r.out), r.next, tc.sent, tc.read, tc.next)
			}
		})
	}
	// An answer the stream does not give.
	answers := make(chan *nats.Msg, 1)
	answers <- &nats.Msg{Header: nats.Header{"Status": {"408"}, "Description": {"Request Timeout"}}}
	r := newJournalReader("s", 1, 0)
	if _, err := r.readBatch(context.Background(), answers); err == nil {
		t.Error("a 408: no error")
	}
}

// watchDirectGets counts the direct gets of stream that s makes: each
// call of the function returned says how many came since the last.
func watchDirectGets(t *testing.T, s *Store, stream string) func() int {
	t.Helper()
	count := requests(t, s, directGetPrefix+stream, nil)
	var seen int64
	return func() int {
		t.Helper()
		n := count()
		since := n - seen
		seen = n
		return int(since)
	}
}
