package jetstream_test

// Benchmarks of the journal's appends on the embedded server, fenced and
// synchronous as the engine makes them. Figures go in docs/storage.md,
// never in assertions.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
)

// benchLogger is the benchmarks' stores' logger: each opens a new data
// directory, and a warning that says so at every open buried the results
// (make bench); an error still shows.
var benchLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// BenchmarkAppend appends batches shaped as the engine's: a model delta
// (one ~200-byte event, no state) and a step (three events and a 1 KiB
// state), to one session and spread over 100. Beside the mean it reports
// the appends' p50, p90 and p99 (ns-p50 and so on): one in a row waits
// for the one before, as a session's goroutine does, and the tails are
// where the mean goes. fsync=always is Options.Sync SyncEveryWrite (the
// gateway's --fsync always), one session: each append waits for the disk.
func BenchmarkAppend(b *testing.B) {
	frame := func(seq int64, size int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":%q}`, seq, strings.Repeat("x", size)))
	}
	state := json.RawMessage(`{"v":1,"pad":"` + strings.Repeat("s", 1000) + `"}`)
	shapes := []struct {
		name   string
		events int
		state  json.RawMessage
	}{{"delta", 1, nil}, {"step", 3, state}}
	type run struct {
		sessions int
		sync     time.Duration
		suffix   string
	}
	for _, shape := range shapes {
		for _, r := range []run{{1, 0, ""}, {100, 0, ""}, {1, jetstream.SyncEveryWrite, "/fsync=always"}} {
			sessions := r.sessions
			b.Run(fmt.Sprintf("%s/sessions=%d%s", shape.name, sessions, r.suffix), func(b *testing.B) {
				s, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: b.TempDir(), Sync: r.sync, Logger: benchLogger})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				seqs := make([]int64, sessions)
				took := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					k := i % sessions
					batch := engine.Batch{State: shape.state}
					for range shape.events {
						seqs[k]++
						batch.Events = append(batch.Events, engine.Event{Seq: seqs[k], Type: "model.delta", Frame: frame(seqs[k], 160)})
					}
					if err := s.Append(ctx, fmt.Sprintf("session%d", k), batch); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(took)
				for _, q := range []struct {
					unit string
					at   float64
				}{{"ns-p50", 0.50}, {"ns-p90", 0.90}, {"ns-p99", 0.99}} {
					b.ReportMetric(float64(took[int(q.at*float64(len(took)-1))]), q.unit)
				}
			})
		}
	}
}

// BenchmarkSummarize writes one session's summary, as the engine does twice
// a turn (busy as the turn starts, idle as it ends).
func BenchmarkSummarize(b *testing.B) {
	s := benchStore(b)
	now := time.Now()
	sum := engine.Summary{ID: "oj4vbio435iplzwvi6ua", Owner: "c9RjA0tGq2m1Xo7oZpU4wLkQeHnB8sVyT5dF3aG6", Title: "What is the weather in Paris, and should I take an umbrella?", Created: now, Updated: now}
	b.ReportAllocs()
	for b.Loop() {
		sum.Busy = !sum.Busy
		if err := s.Summarize(context.Background(), sum); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad reads a session's journal back, as a page that comes back
// to a session out of memory makes the node do: 10 batches (a short chat)
// and 1,000 (a long one's streamed deltas).
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("batches=%d", n), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			for i := int64(1); i <= int64(n); i++ {
				batch := engine.Batch{Events: []engine.Event{{Seq: i, Type: "model.delta",
					Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":"a few words"}`, i))}}}
				if i%20 == 0 || i == int64(n) {
					batch.State = json.RawMessage(`{"v":1,"pad":"` + strings.Repeat("s", 1000) + `"}`)
				}
				if err := s.Append(ctx, "chat", batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.Load(ctx, "chat")
				if err != nil || len(got) != n {
					b.Fatalf("loaded %d batches, %v; want %d", len(got), err, n)
				}
			}
		})
	}
}

// BenchmarkLoadFrom reads a long chat's journal (20,000 batches, 12 MB:
// streamed deltas, steps with a state, a 20 KB result every 100th) for a
// page that resumes before the events the session keeps in memory: from
// 200 events before its end, from its middle, and whole (Load) beside
// them.
func BenchmarkLoadFrom(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	const n = 20000
	for i := int64(1); i <= n; i++ {
		text := "a few words"
		if i%100 == 0 {
			text = strings.Repeat("r", 20<<10)
		}
		batch := engine.Batch{Events: []engine.Event{{Seq: i, Type: "model.delta",
			Frame: json.RawMessage(fmt.Sprintf(`{"type":"model.delta","seq":%d,"text":%q}`, i, text))}}}
		if i%5 == 0 || i == n {
			batch.State = json.RawMessage(`{"v":1,"pad":"` + strings.Repeat("s", 1000) + `"}`)
		}
		if err := s.Append(ctx, "chat", batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		from int64
	}{{"end-200", n - 200}, {"middle", n / 2}, {"whole", 1}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.LoadFrom(ctx, "chat", c.from)
				if err != nil || len(got) == 0 || got[0].Events[0].Seq > c.from {
					b.Fatalf("LoadFrom %d: %d batches, %v", c.from, len(got), err)
				}
			}
		})
	}
}

// BenchmarkSummaries lists summaries: a browser's 20 chats among 1,000
// sessions (GET /sessions), and all of 10,000 (what the engine reads as it
// starts and at each retention sweep).
func BenchmarkSummaries(b *testing.B) {
	for _, c := range []struct {
		name            string
		sessions, owned int
		owner           string
	}{{"browser=20of1000", 1000, 20, "browser0"}, {"all=10000", 10000, 0, ""}} {
		b.Run(c.name, func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			now := time.Now()
			for i := range c.sessions {
				owner := fmt.Sprintf("browser%d", 1+i%50)
				if i < c.owned {
					owner = "browser0"
				}
				sum := engine.Summary{ID: fmt.Sprintf("session%05d", i), Owner: owner, Title: "What is the weather in Paris?", Created: now, Updated: now}
				if err := s.Summarize(ctx, sum); err != nil {
					b.Fatal(err)
				}
			}
			want := c.owned
			if c.owner == "" {
				want = c.sessions
			}
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.Summaries(ctx, c.owner)
				if err != nil || len(got) != want {
					b.Fatalf("listed %d summaries, %v; want %d", len(got), err, want)
				}
			}
		})
	}
}

// BenchmarkSummariesChanged is a cluster node's look for sessions no node
// runs (engine.Options.Adopt), every --lease-ttl: the summaries written
// since the look before, 20, with 10,000 and 100,000 sessions kept (the
// cost must not grow with them), against the first look's read of every
// one of 10,000.
func BenchmarkSummariesChanged(b *testing.B) {
	for _, c := range []struct {
		name          string
		kept, changed int // sessions kept; summaries written between two looks
		whole         bool
	}{{"kept=10000/changed=20", 10000, 20, false}, {"kept=100000/changed=20", 100000, 20, false}, {"kept=10000/whole", 10000, 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			now := time.Now()
			put := func(i int, busy bool) {
				sum := engine.Summary{ID: fmt.Sprintf("session%06d", i), Owner: fmt.Sprintf("browser%d", i%50), Title: "What is the weather in Paris?", Created: now, Updated: now, Busy: busy}
				if err := s.Summarize(ctx, sum); err != nil {
					b.Fatal(err)
				}
			}
			for i := range c.kept {
				put(i, false)
			}
			ch, err := s.SummariesChanged(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			cursor, busy := ch.Cursor, false
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				busy = !busy
				for i := range c.changed {
					put(i, busy)
				}
				b.StartTimer()
				if c.whole {
					cursor = 0
				}
				ch, err := s.SummariesChanged(ctx, cursor)
				if err != nil || len(ch.Summaries) != max(c.changed, c.kept*btoi(c.whole)) {
					b.Fatalf("read %d summaries, %v", len(ch.Summaries), err)
				}
				cursor = ch.Cursor
			}
		})
	}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// benchStore opens a store on an embedded server of its own, closed when b
// ends.
func benchStore(b *testing.B) *jetstream.Store {
	b.Helper()
	s, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: b.TempDir(), Logger: benchLogger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkDeleteLongLivedChat deletes a chat whose journal spans span
// bytes of other chats' messages (a chat used now and again while others
// were busy), after a restart of the store, while another chat appends
// steps one after another. It reports the deletion's time (ms-op) and the
// slowest of the other chat's appends meanwhile (ns-append-max), beside
// the slowest and the median of those before it (ns-append-max-before,
// ns-append-p50): how long a deletion holds up the chats that go on. A
// purge of its subject reads the blocks between its messages whose index
// the server dropped (-delete-after 130s), and holds the appends that
// long; its deletion by its messages' links reads the blocks that hold
// them (deleteByLinks).
func BenchmarkDeleteLongLivedChat(b *testing.B) {
	benchLongLivedChat(b, func(ctx context.Context, s *jetstream.Store) error { return s.Delete(ctx, "old") })
}

// BenchmarkLoadLongLivedChat is BenchmarkDeleteLongLivedChat for a load of
// the chat (its page opened again): the journal's read finds each message
// after the one before it.
func BenchmarkLoadLongLivedChat(b *testing.B) {
	benchLongLivedChat(b, func(ctx context.Context, s *jetstream.Store) error {
		batches, err := s.Load(ctx, "old")
		if err == nil && len(batches) != 2 {
			err = fmt.Errorf("loaded %d steps, want 2", len(batches))
		}
		return err
	})
}

// benchLongLivedChat times op on a store whose chat "old" has two steps,
// span bytes of other chats' apart, while another chat appends.
func benchLongLivedChat(b *testing.B, op func(context.Context, *jetstream.Store) error) {
	for _, span := range []int{64 << 20, 1 << 30, 4 << 30} {
		b.Run(fmt.Sprintf("span=%dMiB", span>>20), func(b *testing.B) {
			ctx := context.Background()
			step := func(seq int64, size int) engine.Batch {
				frame := json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d,"text":"`, seq) + strings.Repeat("x", size) + `"}`)
				return engine.Batch{Events: []engine.Event{{Seq: seq, Type: "message", Frame: frame}}, State: json.RawMessage(`{"v":1}`)}
			}
			var took, appendMax, quietMax, appendP50 time.Duration
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				s, err := jetstream.Open(ctx, jetstream.Options{DataDir: dir, Logger: benchLogger})
				if err != nil {
					b.Fatal(err)
				}
				const size = 64 << 10
				if err := s.Append(ctx, "old", step(1, 100)); err != nil {
					b.Fatal(err)
				}
				for i := range span / size {
					if err := s.Append(ctx, fmt.Sprintf("busy%d", i%100), step(int64(i/100+1), size)); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Append(ctx, "old", step(2, 100)); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				if s, err = jetstream.Open(ctx, jetstream.Options{DataDir: dir, Logger: benchLogger}); err != nil {
					b.Fatal(err)
				}
				// Another chat goes on meanwhile: how long its appends
				// took while op ran, against those before it.
				type appended struct {
					at   time.Time
					took time.Duration
				}
				stop, done := make(chan struct{}), make(chan []appended)
				go func() {
					var took []appended
					for seq := int64(1); ; seq++ {
						select {
						case <-stop:
							done <- took
							return
						default:
						}
						start := time.Now()
						if err := s.Append(ctx, "going-on", step(seq, 200)); err != nil {
							b.Error(err)
						}
						took = append(took, appended{start, time.Since(start)})
					}
				}()
				time.Sleep(*deleteAfter) // the other chat's appends under way
				b.StartTimer()
				start := time.Now()
				if err := op(ctx, s); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				took += end.Sub(start)
				b.StopTimer()
				close(stop)
				var before, during []time.Duration
				for _, a := range <-done {
					switch {
					case a.at.Add(a.took).Before(start):
						before = append(before, a.took)
					case a.at.Before(end):
						during = append(during, a.took)
					}
				}
				if len(during) > 0 {
					appendMax = max(appendMax, slices.Max(during))
				}
				quietMax = max(quietMax, slices.Max(before))
				slices.Sort(before)
				appendP50 += before[len(before)/2]
				_ = s.Close()
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms-op")
			b.ReportMetric(float64(appendMax), "ns-append-max")
			b.ReportMetric(float64(quietMax), "ns-append-max-before")
			b.ReportMetric(float64(appendP50)/float64(b.N), "ns-append-p50")
		})
	}
}

// deleteAfter is how long benchLongLivedChat waits after the restart
// before its operation: past two minutes, the server has dropped its
// index of the blocks between the chat's messages, as on a node that has
// been running (go test -bench DeleteLongLivedChat ./store/jetstream
// -delete-after 130s).
var deleteAfter = flag.Duration("delete-after", 50*time.Millisecond, "BenchmarkDeleteLongLivedChat, BenchmarkLoadLongLivedChat: how long after the restart the chat is deleted or loaded")
