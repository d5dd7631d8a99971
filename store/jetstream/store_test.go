package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/storetest"
	"github.com/clienttools/gateway/testlog"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, dir string) *jetstream.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := jetstream.Open(ctx, jetstream.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store { return open(t, t.TempDir()) })
}

// TestReopen: what was appended is there after the store (and its embedded
// server) stops and starts again on the same directory, and appends carry on
// from where the journal ends.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ev := func(seq int64) engine.Event {
		return engine.Event{Seq: seq, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":` + string(rune('0'+seq)) + `}`)}
	}
	s := open(t, dir)
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(1), ev(2)}, State: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{State: json.RawMessage(`{"n":2}`)}); err != nil { // ends with no event
		t.Fatal(err)
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "s1", Owner: "alice", Title: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	// The journal ends with a step of no event: the next event is still 3.
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(2)}}); !errors.Is(err, engine.ErrSeqGap) {
		t.Errorf("a repeat of event 2 after the reopen: %v, want ErrSeqGap", err)
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(3)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "s1")
	if err != nil || len(got) != 3 || string(got[1].State) != `{"n":2}` || got[2].Events[0].Seq != 3 {
		t.Fatalf("after the reopen: %+v, %v", got, err)
	}
	sums, err := s.Summaries(ctx, "alice")
	if err != nil || len(sums) != 1 || sums[0].Title != "hello" {
		t.Errorf("summaries after the reopen: %+v, %v", sums, err)
	}
}

// TestFenced: an append that does not follow the journal's last batch, as
// seen by this store, is refused: another writer appended meanwhile.
func TestFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	// Another writer (an owner that took the session over) appends its
	// own event 2. (An event 2 the same as this store's, byte for byte,
	// would be taken for this store's own try that landed late: Append.)
	nc, err := nats.Connect("", nats.InProcessServer(s.Server()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := njs.New(nc)
	if _, err := js.Publish(ctx, "gateway.journal.s1", []byte(`{"e":[{"q":2,"t":"message","f":{"type":"message","seq":2,"message":{"role":"user","content":"theirs"}}}]}`)); err != nil {
		t.Fatal(err)
	}
	ev.Seq, ev.Frame = 2, json.RawMessage(`{"type":"message","seq":2}`)
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); !errors.Is(err, jetstream.ErrFenced) {
		t.Errorf("an append behind another writer's: %v, want ErrFenced", err)
	}
	got, _ := s.Load(ctx, "s1")
	if len(got) != 2 {
		t.Errorf("the journal has %d batches, want the 2 that were not fenced", len(got))
	}
}

// TestDataDir: a directory that holds something else is refused, with a
// message that says what to do.
func TestDataDir(t *testing.T) {
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := t.TempDir()
	if err := os.WriteFile(filepath.Join(damaged, "gateway-data.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := t.TempDir()
	if err := os.WriteFile(filepath.Join(newer, "gateway-data.json"), []byte(`{"format":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, dir, want string }{
		{"foreign", foreign, "is not a gateway data directory"},
		{"damaged marker", damaged, "is damaged"},
		{"another format", newer, "format 99"},
		{"a file", file, "failed to read the data directory"},
		{"none", "", "give --data-dir"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: tt.dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open(%q): %v, want an error saying %q", tt.dir, err, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(foreign); len(entries) != 1 {
		t.Errorf("the foreign directory was written to: %d entries", len(entries))
	}
	t.Run("in use", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir)
		_, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: dir})
		if err == nil || !strings.Contains(err.Error(), "in use by another gateway") {
			t.Errorf("a second Open of a directory in use: %v", err)
		}
	})
	// The server's JetStream cannot start there (its folder is a file): the
	// error says why, at once. Open waited 30 s for a server that had given
	// up, and said only that it did not start.
	t.Run("JetStream cannot start", func(t *testing.T) {
		dir := t.TempDir()
		s, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		files := filepath.Join(dir, "jetstream", "jetstream")
		if err := os.RemoveAll(files); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = jetstream.Open(context.Background(), jetstream.Options{DataDir: dir})
		if err == nil || !strings.Contains(err.Error(), "storage directory is not a directory") {
			t.Errorf("Open where JetStream cannot start: %v, want an error saying why", err)
		}
	})
	// gateway.lock keeps the last holder's process id, so it looks like a
	// stale lock file: deleting it must not let a second gateway in.
	t.Run("in use, its lock file deleted", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir)
		if err := os.Remove(filepath.Join(dir, "gateway.lock")); err != nil {
			t.Fatal(err)
		}
		_, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: dir})
		if err == nil || !strings.Contains(err.Error(), "in use by another gateway") {
			t.Errorf("a second Open of a directory in use, its gateway.lock deleted: %v", err)
		}
	})
}

// TestMissingPartsAreSaid: a data directory that held a store and lost a
// part of it (deleted, or the disk lost it) still starts, with the part
// made anew, empty, and the log says what users lost; a new directory
// says nothing of the kind. A directory that lost only its marker is
// refused with a message that says to restore it.
func TestMissingPartsAreSaid(t *testing.T) {
	start := func(dir string) string {
		t.Helper()
		logs := &testlog.Buffer{}
		s, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		return logs.String()
	}
	dir := t.TempDir()
	if logs := start(dir); strings.Contains(logs, "made anew") {
		t.Errorf("a new directory's start says a part was missing:\n%s", logs)
	}
	// A first start stopped before the server made anything leaves the
	// marker alone: the next start lost nothing.
	early := t.TempDir()
	if err := os.WriteFile(filepath.Join(early, "gateway-data.json"), []byte(`{"format": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := start(early); strings.Contains(logs, "made anew") {
		t.Errorf("the start after a first start that stopped early says a part was missing:\n%s", logs)
	}
	streams := filepath.Join(dir, "jetstream", "jetstream", "$G", "streams")
	for _, part := range []string{jetstream.JournalStream, "KV_" + jetstream.CookieBucket} {
		if err := os.RemoveAll(filepath.Join(streams, part)); err != nil {
			t.Fatal(err)
		}
	}
	logs := start(dir)
	for _, part := range []string{jetstream.JournalStream, "KV_" + jetstream.CookieBucket} {
		if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "part="+part) {
			t.Errorf("the start after %s went said nothing of it:\n%s", part, logs)
		}
	}
	if strings.Contains(logs, "part=KV_"+jetstream.SummaryBucket) {
		t.Errorf("a part that was there is said missing:\n%s", logs)
	}

	// A part whose folder is there and its metadata damaged is made anew
	// with the messages the server finds in it: the chats are there, and
	// the log does not say they are gone.
	s := open(t, dir)
	if _, err := s.Own(context.Background(), "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	if err := s.Append(context.Background(), "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := os.WriteFile(filepath.Join(streams, jetstream.JournalStream, "meta.inf"), []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs = start(dir)
	if strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "its metadata, which was written anew") {
		t.Errorf("the start after the journal's metadata was damaged says:\n%s", logs)
	}
	if got, err := open(t, dir).Load(context.Background(), "s1"); err != nil || len(got) != 1 {
		t.Errorf("the chat after the journal's metadata was damaged: %d steps, %v; want its one step", len(got), err)
	}

	if err := os.Remove(filepath.Join(dir, "gateway-data.json")); err != nil {
		t.Fatal(err)
	}
	_, err := jetstream.Open(context.Background(), jetstream.Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "restore that file") {
		t.Errorf("a store without its marker: %v, want a refusal that says to restore it", err)
	}
}

// TestDamageIsInTheLog: what the embedded server finds as it reads
// damaged files (a journal block cut short, as a disk that lost its last
// writes leaves it) is in the gateway's log, where it said nothing.
func TestDamageIsInTheLog(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for seq := int64(1); seq <= 20; seq++ {
		ev := engine.Event{Seq: seq, Type: "message", Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, seq))}
		if err := s.Append(context.Background(), "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	block := filepath.Join(dir, "jetstream", "jetstream", "$G", "streams", jetstream.JournalStream, "msgs", "1.blk")
	st, err := os.Stat(block)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(block, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	s, err = jetstream.Open(context.Background(), jetstream.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if !strings.Contains(logs.String(), `level=WARN msg="embedded NATS server:`) {
		t.Errorf("a journal cut short left no line in the log:\n%s", logs.String())
	}
}

// TestCookies: a browser's cookie session survives a restart of the store.
func TestCookies(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	c := s.Cookies()
	if err := c.Commit("tok_1", []byte("alice"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit("old", []byte("bob"), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	c = open(t, dir).Cookies()
	if b, ok, err := c.Find("tok_1"); err != nil || !ok || string(b) != "alice" {
		t.Errorf("Find after a restart: %q %v %v", b, ok, err)
	}
	if _, ok, _ := c.Find("old"); ok {
		t.Error("an expired cookie session was found")
	}
	if _, ok, err := c.Find("../../x"); ok || err != nil {
		t.Errorf("a forged token: %v %v", ok, err)
	}
	if err := c.Delete("tok_1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Find("tok_1"); ok {
		t.Error("a deleted cookie session was found")
	}
}

// TestOptionsRefused: options that cannot mean what they say are refused
// by Open, naming the option, before anything starts: a LeaseTTL under
// the store's 100 ms failed inside the server with advice to move the
// data aside; another negative Sync silently meant NATS's default; a
// DataDir beside URL was silently unused.
func TestOptionsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    jetstream.Options
		want string
	}{
		{"lease under the store's shortest", jetstream.Options{DataDir: t.TempDir(), LeaseTTL: time.Millisecond}, "LeaseTTL 1ms is under 100ms"},
		{"negative lease", jetstream.Options{DataDir: t.TempDir(), LeaseTTL: -time.Second}, "LeaseTTL -1s"},
		{"negative sync", jetstream.Options{DataDir: t.TempDir(), Sync: -5 * time.Second}, "Sync -5s"},
		{"data dir with a URL", jetstream.Options{DataDir: t.TempDir(), URL: "nats://127.0.0.1:1"}, "DataDir is the embedded server's"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := jetstream.Open(context.Background(), tt.o)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestJournalsListed: the store names every journal, summarized or not,
// and when each was last appended to, so the retention sweep finds a
// journal whose summary is gone; a deleted one is no longer named.
func TestJournalsListed(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
	for _, id := range []string{"named", "unnamed"} {
		if err := s.Append(ctx, id, engine.Batch{Events: []engine.Event{ev}, State: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "named", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	ids, err := s.Journals(ctx)
	if slices.Sort(ids); err != nil || !slices.Equal(ids, []string{"named", "unnamed"}) {
		t.Fatalf("Journals = %v, %v; want named and unnamed", ids, err)
	}
	if at, err := s.JournalUpdated(ctx, "unnamed"); err != nil || time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("JournalUpdated(unnamed) = %v, %v; want a moment ago", at, err)
	}
	if err := s.Delete(ctx, "unnamed"); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Journals(ctx); err != nil || !slices.Equal(ids, []string{"named"}) {
		t.Errorf("Journals after the delete = %v, %v; want named", ids, err)
	}
	for _, id := range []string{"unnamed", "never", "not an id"} {
		if _, err := s.JournalUpdated(ctx, id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("JournalUpdated(%q) = %v, want ErrNoSession", id, err)
		}
	}
}
