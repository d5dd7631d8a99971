package jetstream

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// TestDamagedSummaryIsLeftOut: a summary that does not decode is left out
// of the lists, which go on with every other (before, one failed the whole
// listing: the browser's list of chats, retention, and Resume, which
// stopped the gateway's start), and the log says it once a minute.
func TestDamagedSummaryIsLeftOut(t *testing.T) {
	var log LockedBuffer
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
		t.Errorf("%d log lines about the damaged summary after four listings, want 1:\n%s", n, log.String())
	}
}
