package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// markerFile says a directory is the gateway's data directory, and in which
// format. Open refuses a non-empty directory without it: pointing the
// gateway at the wrong directory must not scribble over someone's files.
const markerFile = "gateway-data.json"

// dataFormat is the data directory's: its layout. The sessions' own
// format is the journal stream's (formatKey).
const dataFormat = 1

type marker struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	Note    string    `json:"note"`
}

// writeMarker makes dir the gateway's data directory, saying note.
func writeMarker(dir, note string) error {
	path := filepath.Join(dir, markerFile)
	m, _ := json.MarshalIndent(marker{Format: dataFormat, Created: time.Now().UTC(), Note: note}, "", "  ")
	if err := os.WriteFile(path, append(m, '\n'), 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// embedded is a NATS server with JetStream and no listening port, in this
// process.
type embedded struct {
	ns       *server.Server
	storeDir string // the server's Options.StoreDir
	unlock   func()
	held     bool // the directory held a store's streams before this start

	// The next start of JetStream is not before retryAt; retryWait, the
	// wait after the last, doubles to reviveMaxWait (revive). Only
	// reviveJetStream's goroutine reads these.
	retryAt    time.Time
	retryWait  time.Duration
	startErr   error  // why the last start failed, until one works (off)
	stoppedFor string // the stream's error revive stopped JetStream for, until a start works
	// How many looks in a row found JetStream off (offLooks), or on with
	// a stream's write error (errLooks): revive acts on two.
	offLooks, errLooks int
}

// checkDataDir makes dir the gateway's data directory, or says why it
// cannot be. held: it was the gateway's already (its marker was there).
func checkDataDir(dir string) (held bool, err error) {
	if dir == "" {
		return false, errors.New("no data directory: give --data-dir, or --store memory")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("failed to create the data directory: %w", err)
		}
	case err != nil:
		return false, fmt.Errorf("failed to read the data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "jetstream" }):
		return false, fmt.Errorf("%s holds the gateway's jetstream/ but not its %s: restore that file from a backup (or write {\"format\": %d} to it, if this is the gateway's directory, and not a gateway backup cut short, which writes it last and is no backup without it), or give --data-dir another directory", dir, markerFile, dataFormat)
	case errors.Is(err, fs.ErrNotExist) && len(entries) > 0:
		return false, fmt.Errorf("%s is not a gateway data directory: it holds other files and no %s. Give --data-dir an empty or new directory, or the one the gateway made", dir, markerFile)
	case errors.Is(err, fs.ErrNotExist):
		return false, writeMarker(dir, "The client-tools gateway's sessions (NATS JetStream files under jetstream/). Back them up with gateway backup, or copy the whole directory while the gateway is stopped.")
	case err != nil:
		return false, fmt.Errorf("failed to read %s: %w", path, err)
	}
	var m marker
	if err := json.Unmarshal(data, &m); err != nil {
		return false, fmt.Errorf("%s is damaged (%v): if this is the gateway's data directory, restore it from a backup; otherwise give --data-dir another directory", path, err)
	}
	if m.Format != dataFormat {
		return false, fmt.Errorf("%s is in data format %d, and this gateway reads format %d: use the gateway version that wrote it", dir, m.Format, dataFormat)
	}
	return true, nil
}

// DefaultSync is Options.Sync's default: NATS's own.
const DefaultSync = 2 * time.Minute

// SyncEveryWrite as Options.Sync flushes each write to the disk before it
// is acknowledged.
const SyncEveryWrite time.Duration = -1

// syncOptions are the server's fsync options for Options.Sync.
func syncOptions(sync time.Duration) (interval time.Duration, always bool) {
	switch {
	case sync == SyncEveryWrite:
		// The interval is the server's own default, as its sync_interval
		// always sets it.
		return DefaultSync, true
	case sync <= 0:
		return DefaultSync, false
	default:
		return sync, false
	}
}

// startEmbedded starts the server with its files in dataDir/jetstream,
// flushing them to the disk as sync says (Options.Sync).
func startEmbedded(dataDir string, sync time.Duration, attach bool, logger *slog.Logger) (*embedded, error) {
	if _, err := os.Stat(filepath.Join(dataDir, markerFile)); attach && err != nil {
		// Opened, an empty directory would become a new store.
		return nil, fmt.Errorf("data-dir %s holds no gateway store (%w): give the directory the gateway runs on", dataDir, err)
	}
	held, err := checkDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			unlock()
		}
	}()
	storeDir := filepath.Join(dataDir, "jetstream")
	// A start stopped before the server made anything (a first one,
	// interrupted) leaves the marker and no streams: nothing was lost.
	streams, _ := os.ReadDir(filepath.Join(storeDir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT, "streams"))
	held = held && len(streams) > 0
	ns, err := startServer(storeDir, sync, natsLog{l: logger})
	if err != nil {
		return nil, err
	}
	started = true
	return &embedded{ns: ns, storeDir: storeDir, unlock: unlock, held: held}, nil
}

// startServer starts a NATS server with JetStream and no listening port,
// its files in storeDir, flushed to the disk as sync says.
func startServer(storeDir string, sync time.Duration, log natsLog) (*server.Server, error) {
	interval, always := syncOptions(sync)
	ns, err := server.NewServer(&server.Options{
		ServerName:   "gateway",
		DontListen:   true,
		JetStream:    true,
		StoreDir:     storeDir,
		SyncInterval: interval,
		SyncAlways:   always,
		MaxPayload:   MaxMessage,
		NoSigs:       true,
		NoLog:        true,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the embedded NATS server: %w", err)
	}
	// Its warnings and errors are the operator's: a journal it rebuilt or
	// cut after a crash, a block it could not read.
	log.fatal = new(atomic.Pointer[string])
	ns.SetLogger(log, false, false)
	ns.Start()
	if why := log.fatal.Load(); why != nil {
		// Start gave up (JetStream could not start: a directory it may
		// not write), and never says it is ready: ReadyForConnections
		// waited its 30 s, and the error named no cause.
		ns.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server did not start with its data in %s: %s", storeDir, *why)
	}
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server did not start with its data in %s", storeDir)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server could not enable JetStream in %s (is it writable, and is another gateway using it?)", storeDir)
	}
	return ns, nil
}

// off says why the server's JetStream stores nothing, or nil when it
// does: it is off (turned off, stopped by revive, or a start failed), or a
// stream of the store's met a write error or was not loaded.
func (e *embedded) off() error {
	werr := e.streamErr()
	switch on := e.ns.JetStreamEnabled(); {
	case !on && e.startErr != nil:
		return fmt.Errorf("the embedded NATS server's JetStream is off, and did not start again (%w): mend what failed under %s; %s", e.startErr, e.storeDir, e.restartsSaid())
	case !on && e.stoppedFor != "":
		werr = e.stoppedFor // stopped by revive, to start again
	case !on:
		if free, err := freeBytes(e.storeDir); err == nil && free >= reviveFree {
			// Not for a full disk: for a write it may not make (its log
			// line says which).
			return fmt.Errorf("the embedded NATS server turned JetStream off after a write failed (its log says which; a permission refused?): mend what failed under %s; %s", e.storeDir, e.restartsSaid())
		}
		return fmt.Errorf("the embedded NATS server turned JetStream off, as it does when a write finds the disk under %s full; it comes back on by itself once the disk has %d MiB free", e.storeDir, reviveFree>>20)
	}
	switch {
	case werr == "":
		return nil
	case noSpace(werr):
		return fmt.Errorf("the embedded NATS server stores nothing more in a stream since a write failed (%s): the disk under %s is full; it stores again by itself once the disk has %d MiB free", werr, e.storeDir, reviveFree>>20)
	case notLoaded(werr):
		return fmt.Errorf("the embedded NATS server could not load a stream from its files when its JetStream started (%s; its warning in the log says why): mend what failed under %s; %s", werr, e.storeDir, e.restartsSaid())
	default:
		return fmt.Errorf("the embedded NATS server stores nothing more in a stream since a write failed (%s): mend what failed under %s (a read-only or failing disk, a file size limit); %s", werr, e.storeDir, e.restartsSaid())
	}
}

// restartsSaid is what off says of revive's starts of JetStream. The
// first comes at the fourth look after a stream's write error (two that
// see it, then two that find JetStream off: 6 to 8 s), at the second after
// JetStream went off by itself; a later one no sooner than the wait after
// the last start, then at the looks it takes.
func (e *embedded) restartsSaid() string {
	if e.retryWait == 0 {
		return fmt.Sprintf("the gateway starts its JetStream again within %v, then, each time it fails again, %v after the last start at the earliest, then twice as long, up to every %v, and stores again once a start works", 4*reviveEvery, reviveFirstWait, reviveMaxWait)
	}
	return fmt.Sprintf("the gateway starts its JetStream again %v after its last start at the earliest (then within a few seconds), then, each time it fails again, after twice as long, up to every %v, and stores again once a start works", e.retryWait, reviveMaxWait)
}

// noSpace says whether a stream's write error is a full disk's.
func noSpace(werr string) bool { return strings.Contains(werr, "no space left") }

// streamErr is the write error a stream of the server met, or that a
// stream could not be loaded from its files at JetStream's start, or "".
// A stream whose write failed (a full disk) stores nothing from then on,
// and its publishers get no answer, until JetStream starts again: a
// single server does not turn JetStream off for it. One not loaded (its
// files damaged or unreadable) is not there to store anything, though
// JetStream is on.
func (e *embedded) streamErr() string {
	for _, he := range e.ns.Healthz(&server.HealthzOptions{Details: true}).Errors {
		// A stream the start could not load counts if it is one of the
		// store's (those a backup copies): a stray folder of another, or
		// one a deletion has not finished removing, stores nothing anyone
		// waits for.
		if he.Type == server.HealthzErrorStream && (strings.Contains(he.Error, "write error") || notLoaded(he.Error) && slices.Contains(backupStreams, he.Stream)) {
			return he.Error
		}
	}
	return ""
}

// notLoaded says whether a stream's error is that JetStream's start could
// not load it.
func notLoaded(werr string) bool { return strings.Contains(werr, "could not be recovered") }

// reviveFree is the room the disk needs before JetStream goes back on: a
// disk with less would fill at once, and the server turn it off again.
const reviveFree = 8 << 20

// reviveEvery is how often a store asks whether its server's JetStream
// should go back on (a variable for tests).
var reviveEvery = 2 * time.Second

// JetStream starts again within a few looks (once the disk has room),
// then, should it stop again, after reviveFirstWait, then twice as long
// each time, up to reviveMaxWait: another write error than a full disk's
// may be mended (a disk remounted, a limit lifted) without a restart, and
// a start reads every stream's files, too much to do every few seconds
// against a disk that still fails.
var (
	reviveFirstWait = 10 * time.Second
	reviveMaxWait   = 5 * time.Minute
)

// revive turns the server's JetStream back on when it stores nothing and
// the disk has room, and reports whether it did. A write that finds the
// disk full stops the stream for good (a write error), or JetStream
// (nats-server's handleOutOfSpace), where storage.md promises that a
// refused step is stored once the disk has room: started again, JetStream
// reads its streams back from the same files. Another write error is
// tried again the same way, after a wait that grows (reviveFirstWait).
//
// It acts on what two looks in a row saw (reviveEvery apart): it stops
// JetStream for a write error seen twice with JetStream on, and starts
// it once two looks found it off, never in the look that stopped it.
// nats-server stops JetStream by itself too (a write refused for its
// permissions), and two stops that overlap are not safe: the one that
// ends last lets go of whatever JetStream the server has by then (a start
// made in between: its streams went on writing the same files beside the
// next start's, and an acknowledged step was lost; a JetStream request met
// a nil, a panic that ended a test's process).
func (e *embedded) revive() (bool, error) {
	werr, enabled := e.streamErr(), e.ns.JetStreamEnabled()
	released := !enabled && e.ns.JetStreamConfig() == nil // off, and let go of
	switch {
	case released:
		e.offLooks, e.errLooks = e.offLooks+1, 0
	case enabled && werr != "":
		e.offLooks, e.errLooks = 0, e.errLooks+1
	default:
		e.offLooks, e.errLooks = 0, 0
	}
	switch {
	case enabled && werr == "":
		if e.retryWait > 0 && time.Since(e.retryAt) > reviveMaxWait {
			// No error for as long as the longest wait: a next one is
			// new, and starts it again at once.
			e.retryAt, e.retryWait = time.Time{}, 0
		}
		return false, nil
	case !enabled && !released:
		return false, nil // still going off: nats-server lets go of it last
	case released || noSpace(werr):
		// A full disk (or JetStream off: nats-server turns it off for a
		// full disk, and for a directory it may not write) waits for room.
		if free, err := freeBytes(e.storeDir); err == nil && free < reviveFree {
			return false, nil
		}
	}
	// A start: now, then, should what failed still be there (EIO, a
	// read-only disk, a file size limit), less and less often.
	now := time.Now()
	if now.Before(e.retryAt) {
		return false, nil
	}
	if enabled {
		if e.errLooks >= 2 {
			e.offLooks, e.errLooks, e.stoppedFor = 0, 0, werr
			return false, e.ns.ShutdownJetStream() // the start comes at a later look
		}
		return false, nil
	}
	if e.offLooks < 2 {
		return false, nil
	}
	e.retryWait = min(max(2*e.retryWait, reviveFirstWait), reviveMaxWait)
	e.retryAt = now.Add(e.retryWait)
	// The server's own configuration, as at its start: the store's
	// directory (the server adds its "jetstream" folder again), and
	// limits it works out from the disk and memory it finds now; its
	// flushes (Options.Sync) come from the server's options, set at start.
	if err := e.ns.EnableJetStream(&server.JetStreamConfig{StoreDir: e.storeDir}); err != nil {
		// nats-server keeps a start that failed part way (its directory
		// unwritable, or no directory) as its JetStream, said on though it
		// stores nothing: the store said it was healthy, and started it
		// no more. Let go of it, for the next start.
		e.startErr = err
		e.offLooks = 0
		if serr := e.ns.ShutdownJetStream(); serr != nil {
			return false, errors.Join(err, serr)
		}
		return false, err
	}
	e.startErr, e.stoppedFor, e.offLooks = nil, "", 0
	return true, nil
}

func (e *embedded) stop() {
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	e.unlock()
}

// reviveJetStream asks every reviveEvery, until Close, whether the
// embedded server stores (embedded.off: Healthy and Append read the
// answer) and whether its JetStream should start again (embedded.revive).
func (s *Store) reviveJetStream() {
	defer s.background.Done()
	t := time.NewTicker(reviveEvery)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		err := s.embedded.off()
		s.setDown(err)
		if err != nil && !warned {
			s.opts.Logger.Error("the session store is off", "err", err)
			warned = true
		}
		switch on, err := s.embedded.revive(); {
		case err != nil:
			s.setDown(s.embedded.off())
			s.opts.Logger.Warn("failed to start the embedded NATS server's JetStream again; trying again", "err", err)
		case on:
			err := s.embedded.off()
			s.setDown(err)
			if err != nil {
				s.opts.Logger.Warn("the embedded NATS server's JetStream started again, and still stores nothing", "err", err)
				break
			}
			s.opts.Logger.Info("the embedded NATS server's JetStream stores again")
			warned = false
		}
	}
}

// setDown records why the embedded server stores nothing (nil: it does).
func (s *Store) setDown(err error) {
	if err == nil {
		s.down.Store(nil)
		return
	}
	s.down.Store(&err)
}

// natsLog passes the embedded server's warnings and errors to the
// gateway's log, each once, as it says them; its notices (start-up, the
// configuration) are debug lines.
type natsLog struct {
	l *slog.Logger
	// backup: the server of a backup under way, whose failures the backup
	// reports itself: its lines are at debug, and say whose they are, so
	// that none reads as the live store's.
	backup bool
	// fatal is the text of the server's last Fatalf (nil: none): it logs
	// why it gave up, and returns from Start.
	fatal *atomic.Pointer[string]
}

func (n natsLog) Noticef(format string, v ...any) { n.log(slog.LevelDebug, format, v) }
func (n natsLog) Warnf(format string, v ...any)   { n.log(slog.LevelWarn, format, v) }
func (n natsLog) Errorf(format string, v ...any)  { n.log(slog.LevelError, format, v) }
func (n natsLog) Fatalf(format string, v ...any) {
	if n.fatal != nil {
		why := fmt.Sprintf(format, v...)
		n.fatal.Store(&why)
	}
	n.log(slog.LevelError, format, v)
}
func (n natsLog) Debugf(string, ...any) {}
func (n natsLog) Tracef(string, ...any) {}

func (n natsLog) log(level slog.Level, format string, v []any) {
	who := "embedded NATS server: "
	if n.backup {
		level, who = slog.LevelDebug, "the backup's NATS server: "
	}
	if n.l.Enabled(context.Background(), level) {
		n.l.Log(context.Background(), level, who+fmt.Sprintf(format, v...))
	}
}
