package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// natsServer runs a NATS server with JetStream on loopback, as a cluster's
// member would be, for stores that share it.
func natsServer(t *testing.T) string {
	t.Helper()
	return natstest.Server(t, nil)
}

func node(t *testing.T, url, name string, ttl time.Duration) *jetstream.Store {
	t.Helper()
	s, err := jetstream.Open(context.Background(), jetstream.Options{URL: url, Node: name, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestOwnership: one node at a time holds a session's lease; a released
// lease is free at once; one whose holder stopped renewing is free after its
// time to live, and the old holder appends nothing more.
func TestOwnership(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t)
	const ttl = 600 * time.Millisecond
	a, b := node(t, url, "node-a", ttl), node(t, url, "node-b", ttl)

	heldElsewhere(t, b, "s1", "") // no lease yet
	own, err := a.Own(ctx, "s1", func() {})
	if err != nil {
		t.Fatal(err)
	}
	heldElsewhere(t, b, "s1", "node-a")
	heldElsewhere(t, a, "s1", "") // its own
	if _, err := b.Own(ctx, "s1", func() {}); !errors.Is(err, engine.ErrOwnedElsewhere) || !strings.Contains(err.Error(), "node-a") {
		t.Fatalf("b.Own while a holds it: %v, want ErrOwnedElsewhere naming node-a", err)
	}
	time.Sleep(2 * ttl) // a renews meanwhile
	if _, err := b.Own(ctx, "s1", func() {}); !errors.Is(err, engine.ErrOwnedElsewhere) {
		t.Fatalf("b.Own after two TTLs of a renewing: %v", err)
	}
	heldElsewhere(t, b, "s1", "node-a") // renewed
	if err := own.Release(ctx); err != nil {
		t.Fatal(err)
	}
	heldElsewhere(t, b, "s1", "") // given back
	ownB, err := b.Own(ctx, "s1", func() {})
	if err != nil {
		t.Fatalf("b.Own after a released: %v", err)
	}

	// b stops renewing, as a paused or dead process does.
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := b.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	_ = ownB
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := a.Own(ctx, "s1", func() {}); err == nil {
			break
		} else if !errors.Is(err, engine.ErrOwnedElsewhere) || time.Now().After(deadline) {
			t.Fatalf("a.Own after b stopped renewing: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ev.Seq, ev.Frame = 2, json.RawMessage(`{"type":"message","seq":2}`)
	// b's lease is past its time: refused. Until b is sure it expired
	// (its time to live and a fifth after its last renewal), b would wait
	// for a renewal to say; after, it is fenced.
	if err := b.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err == nil {
		t.Error("the old holder's append was taken")
	}
	time.Sleep(ttl)
	if err := b.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); !errors.Is(err, jetstream.ErrFenced) {
		t.Errorf("the old holder's append once its lease expired for sure: %v, want ErrFenced", err)
	}
	if err := a.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Errorf("the new holder's append: %v", err)
	}
}

// heldElsewhere checks which other node s says holds session's lease
// (engine.LeaseReader).
func heldElsewhere(t *testing.T, s *jetstream.Store, session, want string) {
	t.Helper()
	got, err := s.HeldElsewhere(context.Background(), session)
	if err != nil || got != want {
		t.Errorf("HeldElsewhere(%q) = %q, %v; want %q", session, got, err, want)
	}
}

// TestLeaseLost: a holder whose renewal fails (the lease was taken over) is
// told, once.
func TestLeaseLost(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t)
	const ttl = 600 * time.Millisecond
	a, b := node(t, url, "node-a", ttl), node(t, url, "node-b", ttl)
	lost := make(chan struct{}, 2)
	if _, err := a.Own(ctx, "s1", func() { lost <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	// An operator (or a bug) deletes the lease; b takes it; a's next
	// renewal finds the key is not its own any more.
	if err := b.ForceRelease(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a was not told it lost the lease")
	}
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := a.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); !errors.Is(err, jetstream.ErrFenced) {
		t.Errorf("append after the lease was lost: %v, want ErrFenced", err)
	}
	if err := a.Summarize(ctx, engine.Summary{ID: "s1", Owner: "alice"}); !errors.Is(err, jetstream.ErrFenced) {
		t.Errorf("a summary after the lease was lost: %v, want ErrFenced", err)
	}
	time.Sleep(ttl)
	if len(lost) != 0 {
		t.Error("lost was called more than once")
	}
}

// TestReleaseDuringRenewal: a lease given back while its renewal is in
// flight is free at once for another node, not left to expire: Release
// deletes the revision the renewal wrote. Many leases with a short time to
// live make renewals run while they are released.
func TestReleaseDuringRenewal(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t)
	const ttl = 600 * time.Millisecond // renewals every 200 ms
	a, b := node(t, url, "node-a", ttl), node(t, url, "node-b", ttl)
	const n = 300
	var owned []engine.Ownership
	for i := range n {
		o, err := a.Own(ctx, fmt.Sprintf("s%d", i), func() {})
		if err != nil {
			t.Fatal(err)
		}
		owned = append(owned, o)
	}
	for _, o := range owned {
		time.Sleep(2 * time.Millisecond) // spread over renewal rounds
		if err := o.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	for i := range n {
		// At once: b does not wait for a's leases to expire.
		o, err := b.Own(ctx, fmt.Sprintf("s%d", i), func() {})
		if err != nil {
			t.Fatalf("b.Own(s%d) after a released it: %v", i, err)
		}
		_ = o.Release(ctx)
	}
}

// A node that starts with another --lease-ttl than the nodes running
// takes the bucket's: it does not shorten the running nodes' leases under
// them, which would let it load a session another node still runs.
func TestLeaseTTLIsTheBuckets(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t)
	a := node(t, url, "node-a", 900*time.Millisecond)
	if _, err := a.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	b := node(t, url, "node-b", 100*time.Millisecond)
	// a renews every 300 ms: a bucket of 100 ms would let its lease lapse
	// between two renewals.
	for range 6 {
		time.Sleep(150 * time.Millisecond)
		if _, err := b.Own(ctx, "s1", func() {}); !errors.Is(err, engine.ErrOwnedElsewhere) {
			t.Fatalf("b.Own while a runs s1 and renews it: %v, want ErrOwnedElsewhere", err)
		}
	}
	// b's own leases last the bucket's time too: held through a wait
	// longer than its flag's.
	if _, err := b.Own(ctx, "s2", func() {}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := a.Own(ctx, "s2", func() {}); !errors.Is(err, engine.ErrOwnedElsewhere) {
		t.Errorf("a.Own of b's session: %v, want ErrOwnedElsewhere (b renews by the bucket's time)", err)
	}
}

// TestCookieBucketLivesAtLeastTheCookie: on a NATS the nodes share, the
// identities' bucket made by a node with a shorter lifetime (an older
// version made it with 24 hours) is raised to this node's, and a node
// with a shorter one leaves a longer bucket as it is: a returning browser
// is never forgotten before its cookie expires.
func TestCookieBucketLivesAtLeastTheCookie(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t)
	js := jetStreamOn(t, url)
	ttl := func() time.Duration {
		t.Helper()
		kv, err := js.KeyValue(ctx, jetstream.CookieBucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TTL()
	}
	open := func(lifetime time.Duration) {
		t.Helper()
		s, err := jetstream.Open(ctx, jetstream.Options{URL: url, CookieLifetime: lifetime})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
	}
	open(24 * time.Hour)
	if got := ttl(); got != 24*time.Hour {
		t.Fatalf("the bucket made with 24h: %v", got)
	}
	open(30 * 24 * time.Hour)
	if got := ttl(); got != 30*24*time.Hour {
		t.Errorf("after a node with 720h started: %v, want 720h", got)
	}
	open(time.Hour)
	if got := ttl(); got != 30*24*time.Hour {
		t.Errorf("after a node with 1h started: %v, want 720h still", got)
	}
}

// TestCookieBucketLeftWhenNotAllowed: a node whose NATS user may not edit
// streams cannot raise a shorter identities' bucket: it starts all the
// same, on the bucket's time, and says how to raise it.
func TestCookieBucketLeftWhenNotAllowed(t *testing.T) {
	ctx := context.Background()
	base := natstest.Server(t, []*server.User{
		{Username: "admin", Password: "a"},
		{Username: "node", Password: "n", Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}}}},
	})
	url := func(user, pass string) string {
		return strings.Replace(base, "nats://", "nats://"+user+":"+pass+"@", 1)
	}
	old, err := jetstream.Open(ctx, jetstream.Options{URL: url("admin", "a"), CookieLifetime: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	var logs strings.Builder
	s, err := jetstream.Open(ctx, jetstream.Options{URL: url("node", "n"), CookieLifetime: 720 * time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("a node that may not raise the bucket: %v, want it to start", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	warned := false
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "could not raise it") {
			warned = true
			if !strings.Contains(line, "Permissions Violation") {
				t.Errorf("the warning gives another cause than the server's refusal: %s", line)
			}
		}
	}
	if !warned {
		t.Errorf("the log says nothing of the bucket it could not raise:\n%s", logs.String())
	}
}

// TestRefusedByPermissions: a node whose NATS user the server refuses a
// JetStream request learns it from the permissions violation the server
// sends at once, not from the request's timeout, and says so. A user that
// may not make streams cannot start on a NATS that has none, and the error
// names the refusal; one that may not edit them stores a step an earlier
// version cannot read with the journal unmarked, and warns of it once.
func TestRefusedByPermissions(t *testing.T) {
	deny := func(subjects ...string) *server.Permissions {
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: subjects}}
	}
	base := natstest.Server(t, []*server.User{
		{Username: "admin", Password: "a"},
		{Username: "nomake", Password: "n", Permissions: deny("$JS.API.STREAM.CREATE.>")},
		{Username: "noedit", Password: "n", Permissions: deny("$JS.API.STREAM.UPDATE.>")},
	})
	url := func(user string) string {
		pass := "n"
		if user == "admin" {
			pass = "a"
		}
		return strings.Replace(base, "nats://", "nats://"+user+":"+pass+"@", 1)
	}

	// Without the refusal, Open asks again until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := jetstream.Open(ctx, jetstream.Options{URL: url("nomake"), Node: "n0", Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = s.Close()
		t.Fatal("a node whose user may not make streams started on a NATS with none")
	}
	if msg := err.Error(); !strings.Contains(msg, "may not") || !strings.Contains(msg, "STREAM.CREATE."+jetstream.JournalStream) {
		t.Errorf("the refusal to start says %q; want it to name what the user may not do", msg)
	}

	ctx = context.Background()
	_ = node(t, url("admin"), "n1", time.Second).Close() // the streams, in format 1
	clk := clock.NewFake(time.Now())
	var logs strings.Builder
	s, err = jetstream.Open(ctx, jetstream.Options{URL: url("noedit"), Node: "n2", Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	step := func(session string) {
		t.Helper()
		ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
		if err := s.Append(ctx, session, engine.Batch{Events: []engine.Event{ev}, State: json.RawMessage(`{"v":2}`), Refs: true}); err != nil {
			t.Fatalf("a step that leaves a result to its event, by a node that may not mark the journal: %v", err)
		}
	}
	step("s1")
	clk.Advance(time.Minute)
	step("s2")
	st, err := jetStreamOn(t, url("admin")).Stream(ctx, jetstream.JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	if f := st.CachedInfo().Config.Metadata["gateway.format"]; f != "1" {
		t.Errorf("the journal's format %q, marked by a user that may not edit it", f)
	}
	var warned, debug int
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "could not mark the journal") {
			continue
		}
		if !strings.Contains(line, "Permissions Violation") {
			t.Errorf("the log gives another cause than the refusal: %s", line)
		}
		switch {
		case strings.Contains(line, "level=WARN"):
			warned++
		case strings.Contains(line, "level=DEBUG"):
			debug++
		}
	}
	if warned != 1 || debug != 1 {
		t.Errorf("the refused mark was warned %d times and logged at debug %d times, want once each:\n%s", warned, debug, logs.String())
	}
}

// TestJournalFormat: the journal's stream says its data format on a NATS
// several nodes share; a node reads formats 1 and 2 (batches in parts),
// refuses, naming it, a format it cannot read, and marks a journal an
// earlier version made without one.
func TestJournalFormat(t *testing.T) {
	ctx := context.Background()
	url := natstest.Server(t, nil)
	js := jetStreamOn(t, url)
	journal := func() natsjs.StreamConfig {
		t.Helper()
		st, err := js.Stream(ctx, jetstream.JournalStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	format := func() string { return journal().Metadata["gateway.format"] }
	setFormat := func(v string) {
		t.Helper()
		cfg := journal()
		cfg.Metadata = map[string]string{}
		if v != "" {
			cfg.Metadata["gateway.format"] = v
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}

	_ = node(t, url, "a", time.Second).Close()
	if got := format(); got != "1" {
		t.Fatalf("a new journal's format: %q, want 1", got)
	}
	setFormat("") // as an earlier version made it
	_ = node(t, url, "b", time.Second).Close()
	if got := format(); got != "1" {
		t.Errorf("a journal made without a format, after a node started on it: %q, want 1", got)
	}
	setFormat("2") // batches in parts
	_ = node(t, url, "c", time.Second).Close()
	if got := format(); got != "2" {
		t.Errorf("a journal in format 2, after a node started on it: %q", got)
	}
	setFormat("3")
	s, err := jetstream.Open(ctx, jetstream.Options{URL: url, Node: "d"})
	if err == nil {
		_ = s.Close()
		t.Fatal("a node started on a journal in format 3")
	}
	if want := "data format 3"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "reads formats 1 and 2") {
		t.Errorf("the refusal says %q; want it to name %q and the formats it reads", err, want)
	}
}

// jetStreamOn is a JetStream context on the server at url, for a test's
// own reads and edits; its connection closes when t ends.
func jetStreamOn(t *testing.T, url string) natsjs.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestReplicasOnASingleServer: --nats-replicas 3 against one NATS server
// (not a cluster) is refused at once, naming the flag and what to do; it
// was asked again until the start's time ran out, a minute.
func TestReplicasOnASingleServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := jetstream.Open(ctx, jetstream.Options{URL: natsServer(t), Replicas: 3})
	if err == nil {
		_ = s.Close()
		t.Fatal("a store of 3 replicas opened on a single server")
	}
	if ctx.Err() != nil || !strings.Contains(err.Error(), "nats-replicas 3") || !strings.Contains(err.Error(), "single server") {
		t.Errorf("the refusal: %v; want it at once, naming nats-replicas 3 and the single server", err)
	}
}

// TestStoreTroubleIsUnavailable: a lease or a journal the store cannot
// reach (NATS gone, a cluster without its quorum) is ErrStoreUnavailable,
// so a page asking for the session is told store_unavailable and tries
// again, not internal, the code of the gateway's own bugs.
func TestStoreTroubleIsUnavailable(t *testing.T) {
	ctx := context.Background()
	s := node(t, natsServer(t), "node-a", time.Second)
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Own(ctx, "s1", func() {}); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Own with NATS gone: %v, want ErrStoreUnavailable", err)
	}
	if _, err := s.Load(ctx, "s1"); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Load with NATS gone: %v, want ErrStoreUnavailable", err)
	}
	// A browser's identity too: the gateway tells it to come back.
	if _, _, err := s.Cookies().Find("tok_1"); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("a cookie session's Find with NATS gone: %v, want ErrStoreUnavailable", err)
	}
	if err := s.Cookies().Commit("tok_1", []byte("alice"), time.Now().Add(time.Hour)); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("a cookie session's Commit with NATS gone: %v, want ErrStoreUnavailable", err)
	}
}
