package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/testlog"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDamagedSummaryIsLeftOut: a summary that does not decode is left out
// of the lists, which go on with every other (before, one failed the whole
// listing: the browser's list of chats, retention, and Resume, which
// stopped the gateway's start), and the log says it once a minute.
func TestDamagedSummaryIsLeftOut(t *testing.T) {
	var log testlog.Buffer
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for _, sum := range []engine.Summary{
		{ID: "s1", Owner: "alice", Title: "one", Created: now, Updated: now},
		{ID: "s2", Owner: "bob", Title: "two", Created: now, Updated: now},
	} {
		if err := s.Summarize(ctx, sum); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.put(ctx, summarySubject+summaryKey("alice", "s3"), []byte(`{"id":"s3","owner":`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		owner string
		want  string
	}{{"", "s1 s2"}, {"alice", "s1"}} {
		for _, read := range []struct {
			name string
			list func() ([]engine.Summary, error)
		}{
			{"batched", func() ([]engine.Summary, error) { return s.Summaries(ctx, tc.owner) }},
			{"by key", func() ([]engine.Summary, error) {
				filter := ">"
				if tc.owner != "" {
					filter = summaryKey(tc.owner, ">")
				}
				return s.summariesByKey(ctx, filter)
			}},
			{"changed since", func() ([]engine.Summary, error) {
				if tc.owner != "" {
					return s.Summaries(ctx, tc.owner)
				}
				ch, err := s.SummariesChanged(ctx, 1) // a get each, after s1
				return append([]engine.Summary{{ID: "s1"}}, ch.Summaries...), err
			}},
		} {
			sums, err := read.list()
			var ids []string
			for _, sum := range sums {
				ids = append(ids, sum.ID)
			}
			slices.Sort(ids)
			if got := strings.Join(ids, " "); err != nil || got != tc.want {
				t.Errorf("%s listing of %q: %v %v; want %s, the damaged one left out", read.name, tc.owner, got, err, tc.want)
			}
		}
	}
	if n := strings.Count(log.String(), "a session summary cannot be read"); n != 1 {
		t.Errorf("%d log lines about the damaged summary after six listings, want 1:\n%s", n, log.String())
	}
}

// TestFeedWithoutBatchedGets: on a server taken for one before 2.11, which
// knows no batched direct get, the feed's first read lists every summary
// by key, and gives a cursor from which the next read gives only what was
// written since.
func TestFeedWithoutBatchedGets(t *testing.T) {
	ctx := context.Background()
	s, put := feedStore(t)
	put("s1", false)
	put("s2", true)
	s.noBatchGet.Store(true)
	first, err := s.SummariesChanged(ctx, 0)
	if err != nil || !first.Whole || len(first.Summaries) != 2 || first.Cursor == 0 {
		t.Fatalf("the first read: %+v, %v; want both summaries, whole, and a cursor", first, err)
	}
	put("s2", false)
	put("s3", true)
	next, err := s.SummariesChanged(ctx, first.Cursor)
	var got []string
	for _, sum := range next.Summaries {
		got = append(got, fmt.Sprintf("%s:%t", sum.ID, sum.Busy))
	}
	slices.Sort(got)
	if err != nil || next.Whole || strings.Join(got, " ") != "s2:false s3:true" {
		t.Errorf("the next read: %v (whole %t), %v; want s2:false s3:true", got, next.Whole, err)
	}
	if !s.noBatchGet.Load() {
		t.Error("the store forgot the server knows no batched get")
	}
}

// TestFeedReadsABacklogAndABucketBegunAgain: more summaries written since
// the cursor than the feed reads a get each come whole, in batches; a
// cursor past the stream's end (its bucket lost and made again, its
// sequences begun anew) reads every summary, said whole.
func TestFeedReadsABacklogAndABucketBegunAgain(t *testing.T) {
	ctx := context.Background()
	s, put := feedStore(t)
	put("first", false)
	first, err := s.SummariesChanged(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	const backlog = 3 * feedGets
	for i := range backlog {
		put(fmt.Sprintf("s%03d", i), false)
	}
	ch, err := s.SummariesChanged(ctx, first.Cursor)
	if err != nil || ch.Whole || len(ch.Summaries) != backlog || ch.Cursor != first.Cursor+backlog {
		t.Errorf("a backlog of %d: %d summaries, cursor %d (whole %t), %v; want them all, cursor %d", backlog, len(ch.Summaries), ch.Cursor, ch.Whole, err, first.Cursor+backlog)
	}
	begun, err := s.SummariesChanged(ctx, ch.Cursor+1_000_000)
	if err != nil || !begun.Whole || len(begun.Summaries) != backlog+1 {
		t.Errorf("a cursor past the stream's end: %d summaries (whole %t), %v; want every one, whole", len(begun.Summaries), begun.Whole, err)
	}
}

// feedStore is a store on an embedded server of its own, closed when t
// ends, and put, which writes alice's session id's summary.
func feedStore(t *testing.T) (*Store, func(id string, busy bool)) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	return s, func(id string, busy bool) {
		t.Helper()
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice", Created: now, Updated: now, Busy: busy}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSummariesByKeyFailingLeavesNoLister: a listing key by key that fails
// on a read leaves no lister behind. The NATS client's lister sends each
// key with no way out but a reader; with more keys left than its buffer
// holds, its goroutine and its consumer stayed for good, one each failed
// listing (a cluster without its quorum, every hour's retention).
func TestSummariesByKeyFailingLeavesNoLister(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i := range 300 {
		if err := s.Summarize(ctx, engine.Summary{ID: fmt.Sprint("s", i), Owner: "alice", Created: now, Updated: now}); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	s.summaries = failingGets{s.summaries}
	if _, err := s.summariesByKey(ctx, ">"); err == nil {
		t.Fatal("a listing whose reads fail did not fail")
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the failed listing, %d before", runtime.NumGoroutine(), before)
		}
	}
}

// failingGets is a bucket whose reads fail.
type failingGets struct{ jetstream.KeyValue }

func (failingGets) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, errors.New("no quorum")
}
