package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// backupStreams are the streams a backup copies, in this order: every one
// the gateway keeps, so that a gateway started on the copy finds what a
// crash at that moment would have left. The journal goes first: a chat
// made while the copy is taken then has a summary without its journal,
// which a gateway deletes as it starts, rather than a journal no list
// names.
var backupStreams = []string{JournalStream, summaryStreamName, "KV_" + CookieBucket, "KV_" + OwnersBucket}

// Copied is what a backup copied of one stream.
type Copied struct {
	Stream   string
	Messages uint64
	Bytes    uint64
}

// backupChunkWait bounds each exchange of a backup with a NATS server:
// the snapshot's start, a chunk, the restore's answer.
const backupChunkWait = 30 * time.Second

// Backup copies the store into dir, a new data directory, while the
// gateway runs: each stream as JetStream snapshots it, at one moment, into
// an embedded NATS server of this process whose files are in a directory
// beside dir (dir's name and ".partial-"), which takes dir's name once the
// copy is whole and on the disk: a backup cut short (a kill -9) is no
// directory of dir's name. A gateway started on dir (--data-dir) has every
// chat as it was when the journal was copied, and every browser's
// identity. An empty dir that exists (a mount point) is filled from
// within instead, its marker last. dir must be new or empty, and apart
// from the data directory; a backup that fails, or whose ctx ends,
// removes what it wrote. From a NATS
// cluster, the copy keeps one replica of each stream.
func (s *Store) Backup(ctx context.Context, dir string) (copied []Copied, err error) {
	exists, err := s.checkBackupDir(dir)
	if err != nil {
		return nil, err
	}
	// A new dir is made whole beside it and renamed; an empty one that
	// exists (a mount point, another disk) is filled from within, its
	// marker last.
	within, prefix := filepath.Dir(dir), filepath.Base(dir)+".partial-"
	if exists {
		within, prefix = dir, ".partial-"
	} else if err := os.MkdirAll(within, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create the backup's directory: %w", err)
	}
	partial, err := os.MkdirTemp(within, prefix)
	if err != nil {
		return nil, fmt.Errorf("failed to create the backup's directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(partial)
			if exists {
				_ = os.RemoveAll(filepath.Join(dir, "jetstream"))
			}
		}
	}()
	ns, err := startServer(filepath.Join(partial, "jetstream"), DefaultSync, natsLog{l: s.opts.Logger, backup: true})
	if err != nil {
		return nil, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	}
	defer stop()
	to, err := nats.Connect("", nats.InProcessServer(ns), nats.Name("gateway-backup"))
	if err != nil {
		return nil, fmt.Errorf("failed to connect to the backup's server: %w", err)
	}
	defer to.Close()
	toJS, err := jetstream.New(to)
	if err != nil {
		return nil, err
	}
	for _, name := range backupStreams {
		c, last, err := copyStream(ctx, s.nc, to, name)
		if errors.Is(err, errNoStream) {
			continue // a store that never made it (an old one's buckets)
		}
		if err == nil && strings.HasPrefix(name, "KV_") {
			c, err = s.copyTail(ctx, toJS, name, last)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to back up %s: %w", name, err)
		}
		copied = append(copied, c)
	}
	to.Close()
	stop()
	note := fmt.Sprintf("A backup of the client-tools gateway's sessions, taken %s: start a gateway with --data-dir on this directory, or on a copy of it.", time.Now().UTC().Format(time.RFC3339))
	if exists {
		return copied, fillBackup(dir, partial, note)
	}
	if err := writeMarker(partial, note); err != nil {
		return nil, err
	}
	if err := syncTree(partial); err != nil {
		return nil, fmt.Errorf("failed to flush the backup to the disk: %w", err)
	}
	// One that something was written into meanwhile refuses the rename.
	if err := os.Rename(partial, dir); err != nil {
		return nil, fmt.Errorf("failed to name the backup %s: %w", dir, err)
	}
	if err := syncPath(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("failed to flush the backup to the disk: %w", err)
	}
	return copied, nil
}

// fillBackup moves the whole copy in partial, a directory in dir, into
// dir, and then writes dir's marker: a copy cut short between the two is
// a jetstream/ without a marker, which no gateway starts on as it is.
func fillBackup(dir, partial, note string) error {
	if err := syncTree(partial); err != nil {
		return fmt.Errorf("failed to flush the backup to the disk: %w", err)
	}
	if err := os.Rename(filepath.Join(partial, "jetstream"), filepath.Join(dir, "jetstream")); err != nil {
		return fmt.Errorf("failed to move the backup into %s: %w", dir, err)
	}
	if err := os.Remove(partial); err != nil {
		return fmt.Errorf("failed to move the backup into %s: %w", dir, err)
	}
	if err := writeMarker(dir, note); err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(dir, markerFile), dir} {
		if err := syncPath(p); err != nil {
			return fmt.Errorf("failed to flush the backup to the disk: %w", err)
		}
	}
	return nil
}

// checkBackupDir says why dir cannot be a backup: not new or empty, or
// in the data directory (a backup of it would hold itself), its links
// followed. exists: dir is an empty directory.
func (s *Store) checkBackupDir(dir string) (exists bool, err error) {
	if s.embedded != nil {
		data, target := realPath(filepath.Dir(s.embedded.storeDir)), realPath(dir)
		for _, pair := range [][2]string{{data, target}, {target, data}} {
			rel, err := filepath.Rel(pair[0], pair[1])
			outside := rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
			if err == nil && !outside {
				return false, fmt.Errorf("%s and the data directory %s are one in the other: a backup goes apart from it", dir, filepath.Dir(s.embedded.storeDir))
			}
		}
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to read the backup's directory %s: %w", dir, err)
	case len(entries) > 0:
		return false, fmt.Errorf("%s is not empty: a backup goes into a new or empty directory", dir)
	}
	return true, nil
}

// realPath is path with its links followed, as far as it exists: the
// rest is joined as given.
func realPath(path string) string {
	path = filepath.Clean(path)
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(path)
		if parent == path {
			return filepath.Join(append([]string{path}, rest...)...)
		}
		rest = append([]string{filepath.Base(path)}, rest...)
		path = parent
	}
}

// errNoStream: the server has no such stream.
var errNoStream = errors.New("no such stream")

// snapshotRefused is a snapshot's refusal: errNoStream for a stream the
// server has not (and only there: a restore's "not found" is no such
// thing).
func snapshotRefused(e *jetstream.APIError) error {
	if e.ErrorCode == jetstream.JSErrCodeStreamNotFound {
		return errNoStream
	}
	return e
}

// copyStream copies stream name from one server to another: from's
// snapshot, chunk by chunk, into to's restore, each chunk acknowledged
// to from once to has taken it (JetStream's flow control holds the
// snapshot meanwhile).
func copyStream(ctx context.Context, from, to *nats.Conn, name string) (_ Copied, snapshotLast uint64, _ error) {
	inbox := from.NewInbox()
	chunks, err := from.SubscribeSync(inbox)
	if err != nil {
		return Copied{}, 0, err
	}
	defer func() { _ = chunks.Unsubscribe() }()
	var snap struct {
		Error  *jetstream.APIError `json:"error"`
		Config json.RawMessage     `json:"config"`
		State  json.RawMessage     `json:"state"`
	}
	if err := apiRequest(ctx, from, "$JS.API.STREAM.SNAPSHOT."+name, map[string]any{"deliver_subject": inbox, "no_consumers": true}, &snap); err != nil {
		return Copied{}, 0, fmt.Errorf("its snapshot: %w", err)
	}
	if snap.Error != nil {
		return Copied{}, 0, snapshotRefused(snap.Error)
	}
	var state struct {
		LastSeq uint64 `json:"last_seq"`
	}
	if err := json.Unmarshal(snap.State, &state); err != nil {
		return Copied{}, 0, fmt.Errorf("its state: %w", err)
	}
	// One server keeps one copy, whatever the cluster kept.
	var cfg map[string]any
	if err := json.Unmarshal(snap.Config, &cfg); err != nil {
		return Copied{}, 0, fmt.Errorf("its configuration: %w", err)
	}
	cfg["num_replicas"] = 1
	delete(cfg, "placement")
	var restore struct {
		Error          *jetstream.APIError `json:"error"`
		DeliverSubject string              `json:"deliver_subject"`
	}
	if err := apiRequest(ctx, to, "$JS.API.STREAM.RESTORE."+name, map[string]any{"config": cfg, "state": snap.State}, &restore); err != nil {
		return Copied{}, 0, fmt.Errorf("its restore: %w", err)
	}
	if restore.Error != nil {
		return Copied{}, 0, fmt.Errorf("its restore: %w", restore.Error)
	}
	for {
		wait, cancel := context.WithTimeout(ctx, backupChunkWait)
		m, err := chunks.NextMsgWithContext(wait)
		cancel()
		if err != nil {
			return Copied{}, 0, fmt.Errorf("its snapshot's next chunk: %w", err)
		}
		if len(m.Data) == 0 {
			// The end: no status or 204 (after a chunk it acknowledged),
			// else the snapshot's failure.
			if st := m.Header.Get("Status"); st != "" && st != "204" {
				return Copied{}, 0, fmt.Errorf("its snapshot failed: %s %s", st, m.Header.Get("Description"))
			}
			break
		}
		var taken struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := requestRaw(ctx, to, restore.DeliverSubject, m.Data, &taken); err != nil {
			return Copied{}, 0, fmt.Errorf("its restore: %w", err)
		}
		if taken.Error != nil {
			return Copied{}, 0, fmt.Errorf("its restore: %w", taken.Error)
		}
		if m.Reply == "" {
			continue // the last chunk asks for no acknowledgement
		}
		if err := m.Respond(nil); err != nil {
			return Copied{}, 0, fmt.Errorf("its snapshot: %w", err)
		}
	}
	var done struct {
		Error *jetstream.APIError `json:"error"`
		State struct {
			Msgs  uint64 `json:"messages"`
			Bytes uint64 `json:"bytes"`
		} `json:"state"`
	}
	if err := requestRaw(ctx, to, restore.DeliverSubject, nil, &done); err != nil {
		return Copied{}, 0, fmt.Errorf("its restore's end: %w", err)
	}
	if done.Error != nil {
		return Copied{}, 0, fmt.Errorf("its restore: %w", done.Error)
	}
	return Copied{Stream: name, Messages: done.State.Msgs, Bytes: done.State.Bytes}, state.LastSeq, nil
}

// backupTailLimit bounds copyTail: a bucket written faster than the
// backup reads it would keep it copying for ever.
const backupTailLimit = time.Minute

// copyTail copies into the backup's stream name what the live one holds
// after its snapshot's last sequence, until it has caught up: a key
// written while its bucket was copied lost its earlier revision (a bucket
// keeps one a key) before the snapshot read it, and its new one is past
// the snapshot's end; without its tail, the backup has neither (a
// browser's identity renewed meanwhile, and every chat of that browser
// with it). The journal needs none: its steps are only appended.
func (s *Store) copyTail(ctx context.Context, to jetstream.JetStream, name string, after uint64) (Copied, error) {
	live, err := s.js.Stream(ctx, name)
	if err != nil {
		return Copied{}, err
	}
	info, err := live.Info(ctx)
	if err != nil {
		return Copied{}, err
	}
	if info.State.LastSeq > after {
		// An ordered consumer reads it as fast as the server sends, not
		// a request a message.
		ctx, cancel := context.WithTimeout(ctx, backupTailLimit)
		defer cancel()
		cons, err := s.js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1})
		if err != nil {
			return Copied{}, fmt.Errorf("what was written while it was copied: %w", err)
		}
		if err := copyMessages(ctx, cons, to); err != nil {
			return Copied{}, err
		}
	}
	got, err := to.Stream(ctx, name)
	if err != nil {
		return Copied{}, err
	}
	st := got.CachedInfo().State
	return Copied{Stream: name, Messages: st.Msgs, Bytes: st.Bytes}, nil
}

// copyMessages publishes into to what cons reads, until it has read all
// there is (its pending count 0), or ctx ends: the stream written faster
// than the copy goes.
func copyMessages(ctx context.Context, cons jetstream.Consumer, to jetstream.JetStream) error {
	msgs, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("what was written while it was copied: %w", err)
	}
	defer msgs.Stop()
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	for {
		msg, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("what was written while it was copied did not stop coming for %v (the gateway writes it faster than the backup copies it): try again when it is less busy: %w", backupTailLimit, ctx.Err())
			}
			return fmt.Errorf("what was written while it was copied: %w", err)
		}
		out := nats.NewMsg(msg.Subject())
		out.Data = msg.Data()
		for k, v := range msg.Headers() {
			// What its writer expected of the live stream (a revision,
			// a message id) means nothing in the backup's.
			if strings.HasPrefix(k, "Nats-Expected-") || k == "Nats-Msg-Id" {
				continue
			}
			out.Header[k] = v
		}
		if _, err := to.PublishMsg(ctx, out); err != nil {
			return fmt.Errorf("what was written while it was copied: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("what was written while it was copied: %w", err)
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

// apiRequest sends a JetStream API request, body as JSON, and reads its
// answer into answer.
func apiRequest(ctx context.Context, nc *nats.Conn, subject string, body, answer any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return requestRaw(ctx, nc, subject, data, answer)
}

// requestRaw sends data and reads the answer, when it has one, into
// answer.
func requestRaw(ctx context.Context, nc *nats.Conn, subject string, data []byte, answer any) error {
	wait, cancel := context.WithTimeout(ctx, backupChunkWait)
	defer cancel()
	m, err := nc.RequestWithContext(wait, subject, data)
	if err != nil {
		return err
	}
	if len(m.Data) == 0 {
		return nil
	}
	return json.Unmarshal(m.Data, answer)
}

// syncPath flushes a file, or a directory's entries (a rename into it),
// to the disk.
func syncPath(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncTree flushes every file and directory under dir to the disk: the
// backup is on the disk when Backup returns.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
