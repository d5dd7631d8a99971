package jetstream

import (
	"context"
	"github.com/clienttools/gateway/testlog"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedBucketTakesTheFlag: on the embedded server, whose one node
// this gateway is, the identities' bucket takes the node's lifetime at each
// start, shorter or longer, and a log line says so: a warning when shorter
// (what the longer time kept goes now).
func TestEmbeddedBucketTakesTheFlag(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log testlog.Buffer
	open := func(lifetime time.Duration) time.Duration {
		t.Helper()
		s, err := Open(ctx, Options{DataDir: dir, CookieLifetime: lifetime, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		kv, err := s.js.KeyValue(ctx, CookieBucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TTL()
	}
	for i, lifetime := range []time.Duration{time.Hour, 48 * time.Hour, time.Hour} {
		if got := open(lifetime); got != lifetime {
			t.Errorf("start %d with %v: the bucket's time to live %v", i+1, lifetime, got)
		}
	}
	if n := strings.Count(log.String(), "now live as long as this gateway's flag says"); n != 2 {
		t.Errorf("%d log lines for the two changes, want 2:\n%s", n, log.String())
	}
	longer, shorter := `level=INFO msg="the bucket's entries now live`, `level=WARN msg="the bucket's entries now live`
	if strings.Count(log.String(), longer) != 1 || strings.Count(log.String(), shorter) != 1 {
		t.Errorf("want the longer time said at INFO, the shorter at WARN:\n%s", log.String())
	}
	// A shorter time says what it costs: a --retain of 72m meant as 72h.
	if !strings.Contains(log.String(), "less than before: the browsers' identities older are gone now") {
		t.Errorf("the shorter time's line does not say the older entries are gone:\n%s", log.String())
	}
}

// TestShorterLeasesSayNoChatGoes: a shorter --lease-ttl is said at WARN as
// a bucket's shorter time, not as the identities' (which speaks of chats
// deleted and backups): leases are not data.
func TestShorterLeasesSayNoChatGoes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log testlog.Buffer
	for _, ttl := range []time.Duration{10 * time.Second, 5 * time.Second} {
		s, err := Open(ctx, Options{DataDir: dir, LeaseTTL: ttl, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
	}
	if !strings.Contains(log.String(), `level=WARN msg="the bucket's entries now live as long as this gateway's flag says (the embedded server's one node decides)" bucket=GATEWAY_OWNERS`) || strings.Contains(log.String(), "identities older are gone") {
		t.Errorf("want the leases' shorter time said plainly:\n%s", log.String())
	}
}
