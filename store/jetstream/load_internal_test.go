package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go"
)

// A load reads the whole journal, in order, however many requests it
// takes: batches cut by their count, by their bytes, or by neither; and
// it leaves nothing on the server (an ordered consumer stayed five
// minutes after each load, with its goroutines).
func TestLoadReadsTheJournalInBatches(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
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
	}
	// Another session's journal interleaved with it: not part of the load.
	other := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := s.Append(ctx, "other", engine.Batch{Events: []engine.Event{other}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		batch, bytes int
	}{
		{"one request", 1000, 16 << 20},
		{"by count", 4, 16 << 20},
		{"a message a request, by bytes", 1000, 1},
		{"count equal to the journal", steps, 16 << 20},
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
		})
	}
	if _, err := s.Load(ctx, "nobody"); err == nil {
		t.Error("loading a session with no journal: no error")
	}
	// A server that knows no batched direct get is read with a consumer:
	// the same journal, and the consumer deleted once read.
	last, err := s.lastMsg(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	byConsumer, err := s.readJournalByConsumer(ctx, "long", last.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if len(byConsumer) != len(want) || string(byConsumer[steps-1].State) != string(want[steps-1].State) {
		t.Errorf("read with a consumer: %d batches, the last %+v; want %d, %+v", len(byConsumer), byConsumer[len(byConsumer)-1], len(want), want[steps-1])
	}
	info, err := s.journal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 0 {
		t.Errorf("the journal has %d consumers after the loads, want none", n)
	}
}

// A server before 2.11 answers a batched direct get with one message and
// its headers: the reader says so, and Load reads with a consumer instead.
func TestReadBatchTellsAnOldServer(t *testing.T) {
	answers := make(chan *nats.Msg, 1)
	answers <- &nats.Msg{Header: nats.Header{"Nats-Stream": {JournalStream}, "Nats-Sequence": {"5"}}, Data: []byte(`{"e":[]}`)}
	r := journalReader{session: "s", next: 1, answers: answers}
	if _, err := r.readBatch(context.Background()); !errors.Is(err, errNoBatchGet) {
		t.Errorf("readBatch = %v, want errNoBatchGet", err)
	}
}
