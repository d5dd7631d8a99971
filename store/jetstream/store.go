package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"
)

// Names on the NATS server.
const (
	JournalStream = "GATEWAY_JOURNAL"
	OwnersBucket  = "GATEWAY_OWNERS"
	// DefaultLeaseTTL is Options.LeaseTTL's default.
	DefaultLeaseTTL = 10 * time.Second
	journalPrefix   = "gateway.journal."
	SummaryBucket   = "GATEWAY_SESSIONS"
	CookieBucket    = "GATEWAY_COOKIES"
	// MaxMessage is the largest message of the journal: a step with a
	// tool result at the browser's read limit (1 MiB) in its tool.finished
	// and tool message fits with room to spare. A larger step, or one on a
	// NATS server whose max_payload is smaller, is stored in parts
	// (parts.go). The embedded server takes messages this large; a
	// cluster's servers should (max_payload), so that steps are seldom
	// split.
	MaxMessage = 8 << 20
)

// ErrFenced is engine.ErrFenced: an append did not follow the journal's
// last batch, because another writer appended meanwhile, or this node's
// lease on the session may have expired.
var ErrFenced = engine.ErrFenced

// Options configure Open. Zero fields take their defaults.
type Options struct {
	// DataDir holds the embedded server's files. Required unless URL is
	// set. Open refuses a directory that holds something other than the
	// gateway's data.
	DataDir string
	// URL connects to an existing NATS server or cluster instead of
	// embedding one (nats://host:4222, comma-separated for several).
	URL string
	// Sync is how often the embedded server flushes its files to the disk
	// (fsync); default NATS's own, DefaultSync. What it has not flushed, a
	// power loss or a kernel crash may lose (a killed process loses
	// nothing acknowledged). SyncEveryWrite flushes each write before it
	// is acknowledged. A server at URL keeps its own (sync_interval):
	// Open refuses Sync with URL.
	Sync time.Duration
	// Replicas of the stream and buckets on a cluster; default 1. Use 3 on
	// a cluster of three or more servers, so losing one loses nothing.
	Replicas int
	// CookieLifetime is how long an idle browser identity is kept; default
	// engine.DefaultRetain (30 days), as the gateway's cookie. It should
	// match the cookie's own lifetime.
	CookieLifetime time.Duration
	// Node names this gateway among the nodes that share the store; leases
	// name their holder with it. Default: "embedded" for the embedded
	// server (its data directory is locked to one process), else a random
	// id. Give each node of a cluster a stable name of its own (a pod's
	// name): a node restarted under its name takes its sessions back at
	// once instead of after LeaseTTL. Never give two live nodes one name.
	Node string
	// LeaseTTL is how long a session's lease lasts without renewal; default
	// DefaultLeaseTTL (10s). The holder renews it every third of it. When a
	// node dies, another runs its sessions after at most this long; shorter
	// fails over sooner, at the cost of more writes and of losing sessions
	// to a node that merely paused.
	LeaseTTL time.Duration
	// Logger gets a line per event worth knowing. Default: slog.Default().
	Logger *slog.Logger
	// Attach opens what the gateway made and changes nothing of it: no
	// stream or bucket is made or updated (their times to live stay), and
	// no start-up migration runs; a store that is not there (a data
	// directory without the gateway's marker) is an error.
	// For the operator's commands beside running gateways (gateway
	// sessions, gateway delete), whose flags are not the gateways'.
	Attach bool
	// Clock tells whether a lease is still this node's to use: how long
	// since its last acknowledged renewal. Default: clock.Real. The
	// renewals themselves come every third of LeaseTTL of real time, as
	// the NATS server expires a lease on its own clock.
	Clock clock.Clock
}

// Store is an engine.Store on JetStream.
type Store struct {
	made      []string // the streams this start made (setUp), for sayWhatWasMissing
	opts      Options
	embedded  *embedded // nil with URL
	nc        *nats.Conn
	js        jetstream.JetStream
	journal   jetstream.Stream
	summaries jetstream.KeyValue
	// summaryStream is the summaries' bucket's stream, which Delete
	// purges and Summaries reads directly.
	summaryStream jetstream.Stream
	cookies       jetstream.KeyValue
	owners        jetstream.KeyValue
	// ownersStream is the leases' bucket's stream, which a renewal reads
	// directly to tell an expired lease from one given back.
	ownersStream jetstream.Stream

	mu    sync.Mutex
	heads map[string]head       // per session: where its journal ends
	owned map[string]*ownership // the sessions whose lease this node holds
	// splits names the set of parts of each session's step that this
	// node is appending in parts and has not stored yet (parts.go).
	splits map[string]splitTry
	// behind counts, per session, the appends in a row that found its
	// journal ending before what this node stored of it (appendBehind).
	behind map[string]int
	// format2: the journal's stream says it may hold parts; until
	// then, markAgain is when a batch in parts may try to mark it again.
	// markDenied: the server refused this node a mark; the next refusals are
	// logged at debug, not warned again.
	format2    atomic.Bool
	markAgain  time.Time
	markDenied bool

	stop       chan struct{}  // closed by Close: the goroutines below end
	background sync.WaitGroup // renew, and reviveJetStream for the embedded server

	// noBatchGet: the server answered a batched direct get as servers
	// before 2.11 do; journals are read with a consumer from then on.
	noBatchGet atomic.Bool

	// denials ends the API requests the server refuses this node's user.
	denials denials
	// leaderGetDenied: the server refused a cookie read through the
	// stream's leader (cookieStore.leaderGet), which the log said once.
	leaderGetDenied atomic.Bool
	// deleteByLinksDenied: the server refused a journal message's
	// deletion (deleteByLinks), which the log said once: journals are
	// purged whole from then on.
	deleteByLinksDenied atomic.Bool
	// rate is the journal's, for farFirst; farBytes is farBytes, which
	// tests lower.
	rate     journalRate
	farBytes uint64
	// down: why the embedded server stores nothing (JetStream off, a
	// stream's write error), as reviveJetStream last found; nil: it
	// stores. Appends fail at once meanwhile, rather than each wait for
	// its timeout.
	down atomic.Pointer[error]
	// summaryWarned lets summaryUnreadable speak once a minute.
	summaryWarned rate.Sometimes
}

var _ engine.Store = (*Store)(nil)

// head is the end of a session's journal as this store last saw it.
type head struct {
	stream uint64 // the stream sequence of its last batch; 0: none
	seq    int64  // the seq of its last event
}

// Open starts the embedded server (or connects to URL) and makes sure the
// stream and buckets exist. ctx ends its set-up early (a signal; the
// embedded server's reading of its files does not watch it), and the
// set-up has a minute of its own (setUpTimeout), from after the embedded
// server has read its files, for as long as they take: a large store after
// a crash rebuilds its index from its blocks, and a minute from before
// that failed every start of a store whose reading took most of it.
func Open(ctx context.Context, o Options) (*Store, error) {
	switch {
	case o.URL != "" && o.Sync != 0:
		return nil, errors.New("the store's Sync is the embedded server's: a NATS server at URL flushes to its disk as its own sync_interval says")
	case o.URL != "" && o.DataDir != "":
		return nil, errors.New("jetstream.Options: DataDir is the embedded server's: with URL, the NATS servers keep the data; give one of them")
	case o.Sync < 0 && o.Sync != SyncEveryWrite:
		return nil, fmt.Errorf("jetstream.Options: Sync %v: want an interval, 0 for NATS's own, or SyncEveryWrite", o.Sync)
	case o.LeaseTTL < 0, o.LeaseTTL > 0 && o.LeaseTTL < 100*time.Millisecond:
		// JetStream keeps nothing for less (a bucket's max age).
		return nil, fmt.Errorf("jetstream.Options: LeaseTTL %v is under 100ms, the shortest time the store keeps anything for", o.LeaseTTL)
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.CookieLifetime <= 0 {
		o.CookieLifetime = engine.DefaultRetain
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	switch {
	case o.Node != "":
	case o.URL == "":
		// The data directory is locked to one process: the embedded node is
		// always the same one, and takes its leases back after a crash.
		o.Node = "embedded"
	default:
		o.Node = nuid.Next()
	}
	s := &Store{opts: o, heads: map[string]head{}, owned: map[string]*ownership{}, splits: map[string]splitTry{}, behind: map[string]int{}, stop: make(chan struct{}),
		summaryWarned: rate.Sometimes{Interval: time.Minute}, farBytes: farBytes}
	var err error
	// The client's own errors (a relayed page's queue that overflowed, say)
	// go to the gateway's log, not to stderr in the client's format.
	logErrors := nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		o.Logger.Warn("NATS client error", "subject", subject, "err", err)
		s.denials.refused(err)
	})
	if o.URL == "" {
		if s.embedded, err = startEmbedded(o.DataDir, o.Sync, o.Attach, o.Logger); err != nil {
			return nil, err
		}
		s.nc, err = nats.Connect(s.embedded.ns.ClientURL(), nats.InProcessServer(s.embedded.ns), nats.Name("gateway"), logErrors)
	} else {
		s.nc, err = nats.Connect(o.URL, nats.Name("gateway"), nats.MaxReconnects(-1), logErrors,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					o.Logger.Warn("disconnected from NATS", "err", err)
				}
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) { o.Logger.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }))
	}
	if err != nil {
		s.closeServer()
		return nil, fmt.Errorf("failed to connect to NATS: %w", err)
	}
	if max := s.nc.MaxPayload(); max < MaxMessage {
		o.Logger.Info("the NATS server takes messages of at most max_payload bytes: a session's step larger than that is stored in parts, a round trip each; max_payload: 8MB avoids most (deploy.md)",
			"max_payload", max, "max_message", MaxMessage)
	}
	setUpCtx, cancel := context.WithTimeout(ctx, setUpTimeout)
	defer cancel()
	if err := s.setUp(setUpCtx); err != nil {
		s.Close()
		return nil, err
	}
	s.background.Add(1)
	go s.renew()
	if s.embedded != nil {
		s.background.Add(1)
		go s.reviveJetStream()
	}
	return s, nil
}

// setUpTimeout bounds Open's set-up of the streams and buckets: NATS
// servers that do not answer, or that refuse for a while (a cluster
// electing its leaders), fail the start with what they said.
const setUpTimeout = time.Minute

// Close stops renewing leases, closes the connection and stops the
// embedded server.
func (s *Store) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.background.Wait()
	if s.nc != nil {
		if err := s.nc.Drain(); err != nil {
			s.nc.Close()
		}
		for s.nc.IsDraining() {
			time.Sleep(time.Millisecond)
		}
	}
	s.closeServer()
	return nil
}

func (s *Store) closeServer() {
	if s.embedded != nil {
		s.embedded.stop()
	}
}

// Healthy reports whether the connection to NATS is up, and the embedded
// server's JetStream on.
func (s *Store) Healthy() error {
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("the connection to NATS is %s", st)
	}
	if down := s.down.Load(); down != nil {
		return *down
	}
	return nil
}

func subject(session string) string { return journalPrefix + session }

// forgetSession forgets what this store knew of a deleted session's
// journal.
func (s *Store) forgetSession(session string) {
	s.mu.Lock()
	delete(s.heads, session)
	delete(s.splits, session)
	s.mu.Unlock()
}

// validID reports whether an id can be a subject token, in a subject
// well within NATS's request line (4 KiB, past which the server closes
// the connection). The engine's ids are shorter (engine.CheckID).
func validID(id string) bool {
	return id != "" && len(id) <= 1024 && !strings.ContainsAny(id, ".*> \t\r\n")
}

// Server is the embedded NATS server, or nil with Options.URL: for tests
// and tools that connect beside the gateway.
func (s *Store) Server() *server.Server {
	if s.embedded == nil {
		return nil
	}
	return s.embedded.ns
}

// Conn is the store's connection to NATS, which the relay between gateway
// nodes shares.
func (s *Store) Conn() *nats.Conn { return s.nc }

// Node is this gateway's name among the nodes that share the store.
func (s *Store) Node() string { return s.opts.Node }
