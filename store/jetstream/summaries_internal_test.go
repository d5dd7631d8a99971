package jetstream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go/jetstream"
)

// summaryIDs lists the sessions of sums, sorted.
func summaryIDs(sums []engine.Summary) []string {
	var ids []string
	for _, s := range sums {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// The summaries are listed with batched direct gets: a browser's, or
// everyone's, whatever the batch, past the markers an earlier gateway left
// and the sessions deleted since, in as many requests as the batches need
// and one that finds the end; the key listing, for a server before 2.11,
// lists the same.
func TestSummariesInBatches(t *testing.T) {
	s, ctx := openForLoad(t)
	var alice, all []string
	for i := range 9 {
		owner := []string{"alice", "bob", ""}[i%3]
		id := fmt.Sprintf("s%d", i)
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: owner, Title: "chat " + id, Created: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
		if owner == "alice" {
			alice = append(alice, id)
		}
	}
	// A marker, as gateways before this one left for a deleted session
	// (the bucket's own Purge), and a session deleted now.
	if err := s.Summarize(ctx, engine.Summary{ID: "gone", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.summaries.Purge(ctx, summaryKey("alice", "gone")); err != nil {
		t.Fatal(err)
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "deleted", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	requests := watchDirectGets(t, s, summaryStreamName)
	for _, tc := range []struct {
		owner    string
		batch    int
		want     []string
		requests int
	}{
		{"alice", 256, alice, 2},
		{"alice", 2, alice, 3}, // two, one and the marker, then the end
		{"", 256, all, 2},
		{"", 4, all, 4},
		{"nobody", 256, nil, 1},
	} {
		t.Run(fmt.Sprintf("owner %q, %d a batch", tc.owner, tc.batch), func(t *testing.T) {
			defer func(b int) { loadBatch = b }(loadBatch)
			loadBatch = tc.batch
			got, err := s.Summaries(ctx, tc.owner)
			if err != nil {
				t.Fatal(err)
			}
			if ids := summaryIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("listed %v, want %v", ids, tc.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Created.After(got[i-1].Created) {
					t.Errorf("not newest first: %v after %v", got[i].ID, got[i-1].ID)
				}
			}
			if n := requests(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			byKey, err := s.summariesByKey(ctx, summaryKeyFilter(tc.owner))
			if err != nil {
				t.Fatal(err)
			}
			if ids := summaryIDs(byKey); !slices.Equal(ids, tc.want) {
				t.Errorf("by key: listed %v, want %v", ids, tc.want)
			}
		})
	}
	if s.noBatchGet.Load() {
		t.Error("the embedded server was taken for one that knows no batched direct get")
	}
	// Once the server is taken for one before 2.11, the keys list them.
	s.noBatchGet.Store(true)
	got, err := s.Summaries(ctx, "alice")
	s.noBatchGet.Store(false)
	if ids := summaryIDs(got); err != nil || !slices.Equal(ids, alice) {
		t.Errorf("with a server before 2.11: %v, %v; want %v", ids, err, alice)
	}
	if n := requests(); n != 0 {
		t.Errorf("%d direct gets of the summaries with a server taken for one before 2.11", n)
	}
	infos := s.summaryStream.ListConsumers(ctx)
	for info := range infos.Info() {
		t.Errorf("a consumer left on the summaries: %s", info.Name)
	}
}

// summaryKeyFilter is the bucket's key filter of owner's summaries ("":
// everyone's).
func summaryKeyFilter(owner string) string {
	if owner == "" {
		return ">"
	}
	return summaryKey(owner, ">")
}

// Deleting a session leaves nothing of it on the server: no message in the
// journal's stream nor in the summaries' (the bucket's Purge left a marker
// per session for ever, a subject the server keeps in its index), in one
// request whoever owns it.
func TestDeleteLeavesNoMarker(t *testing.T) {
	s, ctx := openForLoad(t)
	for _, id := range []string{"a", "b"} {
		if err := s.Append(ctx, id, engine.Batch{Events: []engine.Event{{Seq: 1, Type: "message", Frame: []byte(`{"type":"message","seq":1}`)}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stream, filter string
		want           uint64
	}{
		{JournalStream, subject("a"), 0},
		{summaryStreamName, summarySubject + "*.a", 0},
		{summaryStreamName, summarySubject + ">", 1},
	} {
		str, err := s.js.Stream(ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := str.Info(ctx, jetstream.WithSubjectFilter(c.filter))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, k := range info.State.Subjects {
			n += k
		}
		if n != c.want {
			t.Errorf("%s holds %d messages on %s after the delete, want %d", c.stream, n, c.filter, c.want)
		}
	}
	if _, err := s.Load(ctx, "a"); err == nil {
		t.Error("the deleted session still loads")
	}
}

// The markers gateways before this one left in the summaries' bucket are
// removed when the store opens, once, and the summaries stay.
func TestOpenRemovesOldMarkers(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kept", "old1", "old2"} {
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"old1", "old2"} { // as an earlier Delete did
		if err := s.summaries.Purge(ctx, summaryKey("alice", id)); err != nil {
			t.Fatal(err)
		}
	}
	// As a store whose bucket an earlier gateway made.
	cfg := s.summaryStream.CachedInfo().Config
	delete(cfg.Metadata, markersPurged)
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	info, err := s.summaryStream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || info.Config.Metadata[markersPurged] != "true" {
		t.Errorf("after the open: %d messages in the summaries' stream, metadata %v; want the one summary, and the markers said removed", info.State.Msgs, info.Config.Metadata)
	}
	if sums, err := s.Summaries(ctx, "alice"); err != nil || len(sums) != 1 || sums[0].ID != "kept" {
		t.Errorf("Summaries after the open: %v, %v; want kept", sums, err)
	}
}
