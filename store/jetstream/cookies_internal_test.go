package jetstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/clienttools/gateway/testlog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFreshCookiesTaken: the identities a version of 2026-12-05 kept apart
// until a browser's second visit (GATEWAY_COOKIES_NEW) are found after the
// upgrade, so a browser whose only visit was then keeps its chats; one
// that expired is not; the embedded server's bucket is gone once taken.
func TestFreshCookiesTaken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: legacyFreshCookieBucket, History: 1, TTL: 2 * time.Hour, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(expiry time.Time, data string) []byte {
		v := make([]byte, 8+len(data))
		binary.BigEndian.PutUint64(v, uint64(expiry.UnixNano()))
		copy(v[8:], data)
		return v
	}
	for token, v := range map[string][]byte{
		"firstVisit": entry(time.Now().Add(50*time.Minute), "browser A"),
		"expired":    entry(time.Now().Add(-time.Minute), "browser B"),
	} {
		if _, err := fresh.Put(ctx, token, v); err != nil {
			t.Fatal(err)
		}
	}
	// Renewed already: the cookies' bucket has the newer entry.
	if _, err := fresh.Put(ctx, "renewed", entry(time.Now().Add(time.Hour), "old")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cookies.Put(ctx, "renewed", entry(time.Now().Add(720*time.Hour), "new")); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	cookies := s.Cookies()
	for token, want := range map[string]string{"firstVisit": "browser A", "expired": "", "renewed": "new"} {
		got, ok, err := cookies.Find(token)
		if err != nil || string(got) != want || ok != (want != "") {
			t.Errorf("Find(%s) = %q, %v, %v; want %q", token, got, ok, err, want)
		}
	}
	if _, err := s.js.KeyValue(ctx, legacyFreshCookieBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the bucket after it was taken: %v, want it deleted", err)
	}
}

// reopen closes s and opens the store again on its data directory, as a
// restart does; the test's cleanup closes the new one.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestIdentityMadeAMomentAgoIsFound: a browser's identity stored a moment
// ago is found though a replica behind answers the read (here a mirror
// that answers the bucket's direct gets and holds none of its keys): said
// not found, the browser got a new identity in its place and lost its
// chats (the cluster test's browser, whose WebSocket came right after its
// first page, once).
func TestIdentityMadeAMomentAgoIsFound(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: natstest.Server(t, nil), Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cookies := s.Cookies().(scs.CtxStore)
	// The mirror answers direct gets once it has taken a message.
	if err := cookies.CommitCtx(ctx, "seed", []byte("x"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	behind, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "BEHIND", MirrorDirect: true,
		Mirror: &jetstream.StreamSource{Name: kvStream(CookieBucket), FilterSubject: "$KV." + CookieBucket + ".seed"}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := behind.Info(ctx)
		if err == nil && info.State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror took no message: %+v, %v", info, err)
		}
	}
	for i := range 20 {
		token := fmt.Sprintf("browser%d", i)
		if err := cookies.CommitCtx(ctx, token, []byte("its identity"), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		got, ok, err := cookies.FindCtx(ctx, token)
		if err != nil || !ok || string(got) != "its identity" {
			t.Fatalf("Find of %s just stored: %q, %v, %v; want its identity", token, got, ok, err)
		}
	}
	// Deleted, and never stored: not found, by the leader too.
	if err := cookies.DeleteCtx(ctx, "browser0"); err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"browser0", "nobody"} {
		if got, ok, err := cookies.FindCtx(ctx, token); err != nil || ok {
			t.Errorf("Find of %s: %q, %v, %v; want not found", token, got, ok, err)
		}
	}
}

// TestIdentityLeaderReadRefused: a NATS user that may not read the
// identities through their stream's leader still has a cookie it does not
// know answered at once as unknown (a new identity, as before the leader
// was asked), not a 503 after a timeout at each of its browser's tries,
// and the log says once what the node cannot do.
func TestIdentityLeaderReadRefused(t *testing.T) {
	ctx := context.Background()
	base := natstest.Server(t, []*server.User{{Username: "node", Password: "n",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.MSG.GET.>"}}}}})
	var logs testlog.Buffer
	s, err := Open(ctx, Options{URL: strings.Replace(base, "nats://", "nats://node:n@", 1), Node: "n1", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cookies := s.Cookies().(scs.CtxStore)
	for range 3 {
		start := time.Now()
		if got, ok, err := cookies.FindCtx(ctx, "unknown"); err != nil || ok {
			t.Fatalf("Find of a cookie the store does not keep: %q, %v, %v; want not found", got, ok, err)
		}
		if took := time.Since(start); took >= leaderGetWait {
			t.Errorf("Find of a cookie the store does not keep took %v, its timeout: the refusal was not seen", took)
		}
	}
	if n := strings.Count(logs.String(), "may not read the identities through their stream's leader"); n != 1 {
		t.Errorf("the refusal was said %d times, want once:\n%s", n, logs.String())
	}
}
