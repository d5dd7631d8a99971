package jetstream_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// TestBackupWhileWriting: a backup taken while sessions are written is a
// data directory a store opens with every session written before it as it
// was (its journal, a step larger than a snapshot's chunk included, its
// summary, written again meanwhile) and every browser identity (renewed
// meanwhile: a key written while its bucket was copied was in neither
// the snapshot nor after it); a session written during it has a
// journal that ends where it ended at some moment, with no step missing
// before. A directory that holds something, or one in the data directory,
// is refused; a backup stopped halfway leaves no directory.
func TestBackupWhileWriting(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	s := open(t, data)
	step := func(session string, seq int64, text string) engine.Batch {
		frame, _ := json.Marshal(map[string]any{"type": "message", "seq": seq, "message": map[string]string{"role": "user", "content": text}})
		return engine.Batch{Events: []engine.Event{{Seq: seq, Type: "message", Frame: frame}}, State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))}
	}
	// Random text, which the snapshot's compression keeps about as large.
	large := make([]byte, 450<<10)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(large)
	big := base64.StdEncoding.EncodeToString(large)
	const sessions = 100
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		for seq := int64(1); seq <= 3; seq++ {
			text := "hello"
			if i == 0 && seq == 2 {
				text = big // five of a snapshot's 128 KiB chunks
			}
			if err := s.Append(ctx, id, step(id, seq, text)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice", Title: "chat " + id, Updated: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	cookies := s.Cookies().(scs.CtxStore)
	const identities = 3000
	identity := func(i int) (string, []byte) { return fmt.Sprintf("token-%d", i), []byte(fmt.Sprintf("identity %d", i)) }
	for i := range identities {
		token, b := identity(i)
		if err := cookies.CommitCtx(ctx, token, b, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	// While the backup is taken, a session goes on being written, and
	// identities and summaries are written again (a visit renews its
	// browser's identity; a step, its session's summary).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	keepWriting := func(pause time.Duration, write func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
				if err := write(i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	keepWriting(0, func(i int) error { return s.Append(ctx, "busy", step("busy", int64(i+1), "more")) })
	// A busy site's visits and steps, not a flood.
	keepWriting(50*time.Microsecond, func(i int) error {
		token, b := identity(i * 7 % identities)
		return cookies.CommitCtx(ctx, token, b, time.Now().Add(time.Hour))
	})
	keepWriting(50*time.Microsecond, func(i int) error {
		id := fmt.Sprintf("s%d", i*13%sessions)
		return s.Summarize(ctx, engine.Summary{ID: id, Owner: "alice", Title: "chat " + id, Updated: time.Now()})
	})
	dir := filepath.Join(t.TempDir(), "backup")
	copied, err := s.Backup(ctx, dir)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(copied) == 0 || copied[0].Stream != "GATEWAY_JOURNAL" || copied[0].Messages < 3*sessions {
		t.Errorf("copied %+v, want the journal first with at least %d steps", copied, 3*sessions)
	}

	b := open(t, dir)
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		got, err := b.Load(ctx, id)
		if err != nil || len(got) != 3 {
			t.Fatalf("session %s in the backup: %d steps, %v; want 3", id, len(got), err)
		}
		for j, batch := range got {
			want := step(id, int64(j+1), "hello")
			if i == 0 && j == 1 {
				want = step(id, 2, big)
			}
			if !bytes.Equal(batch.Events[0].Frame, want.Events[0].Frame) || string(batch.State) != string(want.State) {
				t.Fatalf("session %s step %d differs in the backup", id, j+1)
			}
		}
	}
	busy, err := b.Load(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	for j, batch := range busy {
		if batch.Events[0].Seq != int64(j+1) {
			t.Fatalf("the busy session's step %d in the backup holds event %d: a step is missing before it", j+1, batch.Events[0].Seq)
		}
	}
	sums, err := b.Summaries(ctx, "alice")
	if err != nil || len(sums) != sessions {
		t.Errorf("the backup lists %d of alice's sessions (%v), want %d", len(sums), err, sessions)
	}
	missing := 0
	for i := range identities {
		token, want := identity(i)
		if got, found, err := b.Cookies().(scs.CtxStore).FindCtx(ctx, token); err != nil || !found || !bytes.Equal(got, want) {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d identities are not in the backup", missing, identities)
	}

	if _, err := s.Backup(ctx, dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a backup into a directory that holds one: %v, want a refusal", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	half := filepath.Join(t.TempDir(), "half")
	if _, err := s.Backup(cancelled, half); err == nil {
		t.Error("a backup whose context ended: no error")
	}
	if left, _ := filepath.Glob(half + "*"); len(left) > 0 {
		t.Errorf("a backup that failed left %v", left)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{filepath.Join(data, "backup"), filepath.Join(link, "backup")} {
		if _, err := s.Backup(ctx, in); err == nil || !strings.Contains(err.Error(), "one in the other") {
			t.Errorf("a backup into the data directory (%s): %v, want a refusal", in, err)
		}
	}

	// An empty directory that exists (a mount point) is filled from
	// within.
	empty := t.TempDir()
	if _, err := s.Backup(ctx, empty); err != nil {
		t.Fatalf("a backup into an empty directory: %v", err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 2 {
		t.Errorf("the empty directory holds %d entries after the backup, want jetstream/ and the marker", len(entries))
	}
	if sums, err := open(t, empty).Summaries(ctx, "alice"); err != nil || len(sums) != sessions {
		t.Errorf("the backup in the empty directory lists %d sessions (%v), want %d", len(sums), err, sessions)
	}
}

// TestBackupFromACluster: a backup of a store on a NATS cluster, its
// streams replicated three times, is a data directory one embedded server
// opens, with the chats as they were.
func TestBackupFromACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS cluster")
	}
	ctx := context.Background()
	members := natstest.Cluster(t, 3)
	s, err := jetstream.Open(ctx, jetstream.Options{URL: strings.Join(natstest.URLs(members), ","), Node: "a", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	frame := json.RawMessage(`{"type":"message","seq":1,"message":{"role":"user","content":"hello"}}`)
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{{Seq: 1, Type: "message", Frame: frame}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Summarize(ctx, engine.Summary{ID: "s1", Owner: "alice", Title: "hello", Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if _, err := s.Backup(ctx, dir); err != nil {
		t.Fatal(err)
	}
	b := open(t, dir)
	got, err := b.Load(ctx, "s1")
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Events[0].Frame, frame) {
		t.Errorf("the chat in the backup: %+v, %v", got, err)
	}
	if sums, err := b.Summaries(ctx, "alice"); err != nil || len(sums) != 1 {
		t.Errorf("alice's chats in the backup: %+v, %v", sums, err)
	}
}
