// Package jetstream keeps the gateway's sessions on NATS JetStream: an
// engine.Store (each session's journal on a stream, a subject per session;
// the summaries in a key-value bucket) and an scs.Store for the browsers'
// cookie identities, on the same backend. Open embeds a NATS server with no
// listening port and file storage in a data directory, or connects to an
// existing NATS server or cluster.
//
// Appends are fenced: each carries the stream sequence the store last saw
// for the session's subject (JetStream's expected-last-subject-sequence),
// so an append that does not follow the journal's last batch is refused,
// whoever wrote it.
//
// Concurrency: a Store is safe for concurrent use; the engine appends to
// one session from one goroutine at a time.
package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	// Clock tells whether a lease is still this node's to use: how long
	// since its last acknowledged renewal. Default: clock.Real. The
	// renewals themselves come every third of LeaseTTL of real time, as
	// the NATS server expires a lease on its own clock.
	Clock clock.Clock
}

// Store is an engine.Store on JetStream.
type Store struct {
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

	mu    sync.Mutex
	heads map[string]head       // per session: where its journal ends
	owned map[string]*ownership // the sessions whose lease this node holds
	// splits names the set of parts of each session's step that this
	// node is appending in parts and has not stored yet (parts.go).
	splits map[string]splitTry
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
	// down: why the embedded server stores nothing (JetStream off, a
	// stream's write error), as reviveJetStream last found; nil: it
	// stores. Appends fail at once meanwhile, rather than each wait for
	// its timeout.
	down atomic.Pointer[error]
}

var _ engine.Store = (*Store)(nil)

// head is the end of a session's journal as this store last saw it.
type head struct {
	stream uint64 // the stream sequence of its last batch; 0: none
	seq    int64  // the seq of its last event
}

// Open starts the embedded server (or connects to URL) and makes sure the
// stream and buckets exist.
func Open(ctx context.Context, o Options) (*Store, error) {
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
	s := &Store{opts: o, heads: map[string]head{}, owned: map[string]*ownership{}, splits: map[string]splitTry{}, stop: make(chan struct{})}
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
		if s.embedded, err = startEmbedded(o.DataDir); err != nil {
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
	if err := s.setUp(ctx); err != nil {
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

func (s *Store) setUp(ctx context.Context) error {
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		return fmt.Errorf("failed to use JetStream: %w", err)
	}
	where := "the NATS server at " + s.opts.URL
	if s.embedded != nil {
		where = s.opts.DataDir
	}
	hint := func(what string, err error) error {
		if refusedReplicas(err) {
			return fmt.Errorf("nats-replicas %d: %s is a single server, which keeps one copy (%w): give it a cluster of %d or more servers, or take --nats-replicas 1", s.opts.Replicas, where, err, s.opts.Replicas)
		}
		if errors.Is(err, errDenied) {
			return fmt.Errorf("failed to open %s in %s: %w", what, where, err)
		}
		return fmt.Errorf("failed to open %s in %s: %w (if the data is damaged, move it aside and start again, or restore it from a backup)", what, where, err)
	}
	s.journal, err = s.ensureStream(ctx, jetstream.StreamConfig{
		Name:        JournalStream,
		Description: "the gateway's session journals, a subject per session",
		Subjects:    []string{journalPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.opts.Replicas,
		MaxMsgSize:  MaxMessage,
		AllowDirect: true,
		Metadata:    map[string]string{formatKey: strconv.Itoa(formatWhole)},
	})
	if err != nil {
		return hint("the session journal", err)
	}
	if err := s.checkFormat(ctx, where); err != nil {
		return err
	}
	s.summaries, _, err = s.ensureKV(ctx, takeBucketTTL, jetstream.KeyValueConfig{
		Bucket: SummaryBucket, Description: "a summary per session, keyed <owner>.<session>",
		Storage: jetstream.FileStorage, Replicas: s.opts.Replicas, History: 1,
		Metadata: map[string]string{markersPurged: "true"}, // a new bucket has none
	})
	if err != nil {
		return hint("the session summaries", err)
	}
	if s.summaryStream, err = s.js.Stream(ctx, summaryStreamName); err != nil {
		return hint("the session summaries", err)
	}
	if err := s.purgeOldMarkers(ctx); err != nil {
		s.opts.Logger.Warn("the markers of sessions deleted by an earlier version stay until the next start", "err", err)
	}
	s.cookies, _, err = s.ensureKV(ctx, raiseBucketTTL, jetstream.KeyValueConfig{
		Bucket: CookieBucket, Description: "the browsers' cookie identities",
		Storage: jetstream.FileStorage, Replicas: s.opts.Replicas, History: 1, TTL: s.opts.CookieLifetime,
	})
	if err != nil {
		return hint("the cookie identities", err)
	}
	if err := s.takeFreshCookies(ctx); err != nil {
		s.opts.Logger.Warn("the identities an earlier version kept apart, until a browser's second visit, were not all taken: those browsers start anew", "bucket", legacyFreshCookieBucket, "err", err)
	}
	var leaseTTL time.Duration
	s.owners, leaseTTL, err = s.ensureKV(ctx, takeBucketTTL, jetstream.KeyValueConfig{
		Bucket: OwnersBucket, Description: "which node runs each session: a lease per session, renewed by its holder",
		Storage: jetstream.FileStorage, Replicas: s.opts.Replicas, History: 1, TTL: s.opts.LeaseTTL,
	})
	if err != nil {
		return hint("the session leases", err)
	}
	// Nodes that disagreed on a lease's life would each trust their own:
	// this one renews and trusts its leases by the bucket's.
	s.opts.LeaseTTL = leaseTTL
	if s.journal.CachedInfo().Config.Replicas != s.opts.Replicas {
		s.opts.Logger.Warn("the session journal's stream has another number of replicas than --nats-replicas, which only a new stream takes: change it with the nats CLI (nats stream edit "+JournalStream+" --replicas N) and each bucket's with nats kv",
			"replicas", s.journal.CachedInfo().Config.Replicas, "nats_replicas", s.opts.Replicas)
	}
	return nil
}

// formatKey is the journal stream's metadata entry that says in which
// format the sessions are kept, on a NATS several nodes share as in the
// embedded server's data directory: a version that cannot read them
// refuses to start, naming the format, rather than fail chat by chat.
const formatKey = "gateway.format"

// The journal's formats. formatWhole: every batch is one message, and
// every state holds its calls' results, as every version before format2
// wrote. format2: a batch may be in parts (parts.go), and a state may
// leave a long result to its event (engine.Batch.Refs). A stream says
// formatWhole until a node first stores such a batch, so that a version
// that reads only formatWhole may run on it until then.
const (
	formatWhole = 1
	format2     = 2
)

// checkFormat refuses a journal in a format this version cannot read. A
// journal an earlier version made, with no format, is in formatWhole: it
// is marked, and if this node's NATS user may not edit streams it starts
// all the same, with a warning.
func (s *Store) checkFormat(ctx context.Context, where string) error {
	cfg := s.journal.CachedInfo().Config
	switch format := cfg.Metadata[formatKey]; format {
	case strconv.Itoa(formatWhole):
		return nil
	case strconv.Itoa(format2):
		s.format2.Store(true)
		return nil
	case "":
		if err := s.markStream(ctx, cfg, formatKey, strconv.Itoa(formatWhole)); err != nil {
			s.opts.Logger.Warn("the session journal's stream does not say its data format, and this node could not mark it (its NATS user may not edit streams): start a node once with a user that may, or add the metadata entry "+formatKey+"="+strconv.Itoa(formatWhole)+" to the "+JournalStream+" stream", "err", err)
		}
		return nil
	default:
		return fmt.Errorf("%s holds the sessions in data format %s (the %s stream's %s), and this gateway reads formats %d and %d: use the gateway version that wrote them", where, format, JournalStream, formatKey, formatWhole, format2)
	}
}

// markFormat2 marks the journal's stream format2 before this node stores
// its first batch an earlier version cannot read (in parts, or with a
// state that leaves a result to its event): such a version then refuses
// to start on it rather than call that session damaged. A node that
// cannot mark it (NATS away, or a NATS user that may not edit streams)
// warns and stores the batch all the same, since a session unable to
// store a step stops; it tries again at a later such batch, at most once
// a minute.
func (s *Store) markFormat2(ctx context.Context) {
	if s.format2.Load() {
		return
	}
	s.mu.Lock()
	now := s.opts.Clock.Now()
	wait := now.Before(s.markAgain)
	if !wait {
		s.markAgain = now.Add(time.Minute)
	}
	s.mu.Unlock()
	if wait {
		return
	}
	// The stream's config now, not at start: others may have edited it.
	info, err := request(ctx, &s.denials, "STREAM.INFO."+JournalStream, func(ctx context.Context) (*jetstream.StreamInfo, error) { return s.journal.Info(ctx) })
	already := err == nil && info.Config.Metadata[formatKey] == strconv.Itoa(format2)
	if err == nil && !already {
		err = s.markStream(ctx, info.Config, formatKey, strconv.Itoa(format2))
	}
	if err != nil {
		// A user that may not edit streams is told once; asking again a
		// minute on costs a round trip, and finds a permission given since.
		level := slog.LevelWarn
		if errors.Is(err, errDenied) {
			s.mu.Lock()
			if s.markDenied {
				level = slog.LevelDebug
			}
			s.markDenied = true
			s.mu.Unlock()
		}
		s.opts.Logger.Log(ctx, level, "this node stores a step that an earlier gateway version cannot read (in parts, or with a result left to its event), and could not mark the journal's stream so: it tries again at the next such step, a minute on. If its NATS user may not edit streams, add the metadata entry "+formatKey+"="+strconv.Itoa(format2)+" to the "+JournalStream+" stream yourself, so that such a version refuses to start on it", "err", err)
		return
	}
	if !already {
		s.opts.Logger.Info("the journal's stream says data format 2 from now on: gateway versions before it refuse to start on it (deploy.md, Upgrading)", "stream", JournalStream)
	}
	s.format2.Store(true)
}

// ensureStream opens the stream, or makes it when it is missing. Gateways
// that start together race to make it: a loser finds it made.
func (s *Store) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return ensure(ctx, &s.denials, cfg.Name, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, cfg.Name) },
		func(ctx context.Context) (jetstream.Stream, error) { return s.js.CreateStream(ctx, cfg) },
		func(err error) bool { return errors.Is(err, jetstream.ErrStreamNotFound) })
}

// ttlPolicy is what ensureKV does on a NATS that several nodes share with
// a bucket whose entries' time to live is not this node's.
type ttlPolicy int

const (
	// takeBucketTTL: the bucket's stays, with a warning, and this node
	// takes it. For the leases: a node starting with another --lease-ttl
	// would change every running node's leases under it (a shorter one
	// lets a second node load a session the first still runs).
	takeBucketTTL ttlPolicy = iota
	// raiseBucketTTL: a bucket whose entries live less than this node's
	// flag says gets the flag's; a longer one stays. For the browsers'
	// identities: one kept longer than a node's cookie lasts costs a
	// little room, and one forgotten sooner loses a returning browser every
	// chat (a bucket made by an older version lived 24 hours).
	raiseBucketTTL
)

// ensureKV opens the bucket, or makes it when it is missing. On the
// embedded server, whose one node is this one, a bucket whose entries'
// time to live is not cfg's (--lease-ttl or --retain changed) gets cfg's.
// On a NATS that several nodes share, policy says. It returns the time to
// live the bucket has, which the caller takes.
func (s *Store) ensureKV(ctx context.Context, policy ttlPolicy, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, time.Duration, error) {
	kv, err := ensure(ctx, &s.denials, kvStream(cfg.Bucket), func(ctx context.Context) (jetstream.KeyValue, error) { return s.js.KeyValue(ctx, cfg.Bucket) },
		func(ctx context.Context) (jetstream.KeyValue, error) { return s.js.CreateKeyValue(ctx, cfg) },
		func(err error) bool { return errors.Is(err, jetstream.ErrBucketNotFound) })
	if err != nil {
		return nil, 0, err
	}
	st, err := request(ctx, &s.denials, "STREAM.INFO."+kvStream(cfg.Bucket), kv.Status)
	if err != nil || st.TTL() == cfg.TTL {
		return kv, cfg.TTL, nil
	}
	if s.embedded != nil {
		kv, err := request(ctx, &s.denials, "STREAM.UPDATE."+kvStream(cfg.Bucket), func(ctx context.Context) (jetstream.KeyValue, error) {
			return s.js.UpdateKeyValue(ctx, cfg)
		})
		return kv, cfg.TTL, err
	}
	if policy == raiseBucketTTL {
		if st.TTL() == 0 || (cfg.TTL != 0 && st.TTL() > cfg.TTL) {
			return kv, st.TTL(), nil // longer already
		}
		if err := s.raiseTTL(ctx, st, cfg.TTL); err != nil {
			// Not a reason to stay down (the NATS account may not edit
			// streams): the bucket's time holds until someone raises it.
			s.opts.Logger.Warn("a bucket's entries live less than this node's flags say, and this node could not raise it: raise it yourself (nats kv edit BUCKET --ttl)",
				"bucket", cfg.Bucket, "ttl", st.TTL(), "flag", cfg.TTL, "err", err)
			return kv, st.TTL(), nil
		}
		s.opts.Logger.Info("a bucket's entries lived less than this node's flags say: they live as long now",
			"bucket", cfg.Bucket, "was", st.TTL(), "ttl", cfg.TTL)
		return kv, cfg.TTL, nil
	}
	s.opts.Logger.Warn("a bucket's entries live another time than this node's flags say; the nodes share it, so this node takes the bucket's: to change it, edit the bucket (nats kv edit) and restart every node",
		"bucket", cfg.Bucket, "ttl", st.TTL(), "flag", cfg.TTL)
	return kv, st.TTL(), nil
}

// raiseTTL sets the bucket's stream's MaxAge (its entries' time to live)
// and nothing else of its configuration, which other nodes made and share:
// its replicas stay, whatever this node's --nats-replicas.
func (s *Store) raiseTTL(ctx context.Context, st jetstream.KeyValueStatus, ttl time.Duration) error {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return fmt.Errorf("the bucket's status is a %T, not a stream's", st)
	}
	cfg := bs.StreamInfo().Config
	cfg.MaxAge = ttl
	return s.updateStream(ctx, cfg)
}

// updateStream replaces a stream's configuration with cfg.
func (s *Store) updateStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	_, err := request(ctx, &s.denials, "STREAM.UPDATE."+cfg.Name, func(ctx context.Context) (jetstream.Stream, error) { return s.js.UpdateStream(ctx, cfg) })
	return err
}

// kvStream is the name of a bucket's stream.
func kvStream(bucket string) string { return "KV_" + bucket }

// ensure looks a thing up, makes it when it is missing, and looks again
// when the making fails (another gateway made it first), until ctx ends
// or the server refuses it for good. Each request has a few seconds: one
// lost while the cluster elects a leader is asked again. stream is the
// thing's stream, whose API subjects this node's NATS user may be refused
// (denials).
func ensure[T any](ctx context.Context, d *denials, stream string, lookup, create func(context.Context) (T, error), missing func(error) bool) (T, error) {
	var zero T
	var err error
	for try := 0; ; try++ {
		var v T
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if v, err = request(rctx, d, "STREAM.INFO."+stream, lookup); err == nil {
			cancel()
			return v, nil
		}
		if missing(err) {
			if v, err = request(rctx, d, "STREAM.CREATE."+stream, create); err == nil {
				cancel()
				return v, nil
			}
		}
		cancel()
		if ctx.Err() != nil || refusedForGood(err) {
			return zero, err
		}
		select {
		case <-time.After(time.Duration(min(try+1, 10)) * 100 * time.Millisecond):
		case <-ctx.Done():
			return zero, err
		}
	}
}

// The server's refusals of a stream or bucket that asking again will not
// change (its error codes).
const (
	errCodeReplicasNotSupported = 10074 // replicas > 1 on a server that is not clustered
	errCodeInvalidConfig        = 10052
)

// apiErrorCode is the code of the server's refusal err wraps; 0: none.
func apiErrorCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}

// refusedForGood reports a refusal that asking again will not change.
func refusedForGood(err error) bool {
	code := apiErrorCode(err)
	return code == errCodeReplicasNotSupported || code == errCodeInvalidConfig || errors.Is(err, errDenied)
}

// refusedReplicas reports the refusal of replicas by a single server.
func refusedReplicas(err error) bool { return apiErrorCode(err) == errCodeReplicasNotSupported }

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

// batch is a Batch as the journal stores it.
type batch struct {
	Events []storedEvent   `json:"e,omitempty"`
	State  json.RawMessage `json:"s,omitempty"`
}

type storedEvent struct {
	Seq   int64           `json:"q"`
	Type  string          `json:"t"`
	Frame json.RawMessage `json:"f"`
}

// encodeBatch writes b as a batch, by hand: the frames and the state are
// JSON the engine made, copied as they are, where encoding/json would scan
// and compact every byte of them again at every step.
func encodeBatch(b engine.Batch) ([]byte, error) {
	size := len(`{"e":[],"s":}`) + len(b.State)
	for _, ev := range b.Events {
		size += len(`{"q":,"t":"","f":},`) + 20 + len(ev.Type) + len(ev.Frame)
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	if len(b.Events) > 0 {
		out = append(out, `"e":[`...)
		for i, ev := range b.Events {
			if len(ev.Frame) == 0 {
				return nil, fmt.Errorf("event %d (%s) has no frame", ev.Seq, ev.Type)
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"q":`...)
			out = strconv.AppendInt(out, ev.Seq, 10)
			out = append(out, `,"t":`...)
			out = engine.AppendJSONString(out, ev.Type)
			out = append(out, `,"f":`...)
			out = append(out, ev.Frame...)
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	if len(b.State) > 0 {
		if len(b.Events) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"s":`...)
		out = append(out, b.State...)
	}
	return append(out, '}'), nil
}

// lastMsg reads the last message of session's journal. The read is a direct
// get, which on a cluster only replicas that are caught up answer: right
// after a node dies or under load, none may be for a moment, and the server
// says "no responders". That passes; the read is tried again for a while.
func (s *Store) lastMsg(ctx context.Context, session string) (*jetstream.RawStreamMsg, error) {
	var retry replicaRetry
	for {
		msg, err := s.journal.GetLastMsgForSubject(ctx, subject(session))
		if !errors.Is(err, nats.ErrNoResponders) || !retry.again(ctx) {
			return msg, err
		}
	}
}

// replicaTries is how many times a read that the stream's replicas did not
// answer is made; replicaRetryWait, the first wait between two, doubles
// each time (20 ms: about 2.5 s in all).
const replicaTries = 8

var replicaRetryWait = 20 * time.Millisecond

// replicaRetry paces the tries of a read that the stream's replicas did
// not answer (lastMsg, readJournal); its zero value is a first try.
type replicaRetry struct {
	tries int
	wait  time.Duration
}

// again waits before the next try and reports true, or reports false once
// replicaTries were made or ctx ended.
func (r *replicaRetry) again(ctx context.Context) bool {
	if r.tries++; r.tries >= replicaTries {
		return false
	}
	if r.wait == 0 {
		r.wait = replicaRetryWait
	}
	select {
	case <-time.After(r.wait):
	case <-ctx.Done():
		return false
	}
	r.wait *= 2
	return true
}

// headOf returns where session's journal ends, asking the server the first
// time.
func (s *Store) headOf(ctx context.Context, session string) (head, error) {
	s.mu.Lock()
	h, ok := s.heads[session]
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	msg, err := s.lastMsg(ctx, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return head{}, nil
	}
	if err != nil {
		return head{}, fmt.Errorf("failed to read the end of session %s's journal: %w", session, err)
	}
	h = head{stream: msg.Sequence}
	var b engine.Batch
	if !isPart(msg.Data) {
		if b, err = decodeBatch(msg.Data); err != nil {
			return head{}, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, session, msg.Sequence, err)
		}
	}
	if n := len(b.Events); n > 0 {
		h.seq = b.Events[n-1].Seq
	} else {
		// A step with no event, or a part: the last event is read from the
		// journal.
		if h.seq, err = s.lastEventSeq(ctx, session, msg.Sequence); err != nil {
			return head{}, err
		}
	}
	return h, nil
}

// lastEventSeq finds the seq of session's last event by reading its
// journal through its last message, at stream sequence through; rare (the
// process restarted right after a step with no event, or one in parts).
func (s *Store) lastEventSeq(ctx context.Context, session string, through uint64) (int64, error) {
	batches, err := s.loadThrough(ctx, session, through)
	if err != nil {
		return 0, err
	}
	var last int64
	for _, b := range batches {
		if n := len(b.Events); n > 0 {
			last = b.Events[n-1].Seq
		}
	}
	return last, nil
}

// Append implements engine.Store.
func (s *Store) Append(ctx context.Context, session string, b engine.Batch) error {
	if !validID(session) {
		return fmt.Errorf("session id %q cannot name a journal", session)
	}
	if err := s.holds(session); err != nil {
		return err
	}
	if down := s.down.Load(); down != nil {
		return fmt.Errorf("failed to append to session %s's journal: %w", session, *down)
	}
	if b.Refs {
		s.markFormat2(ctx)
	}
	h, err := s.headOf(ctx, session)
	if err != nil {
		return err
	}
	if len(b.Events) > 0 && h.seq >= b.Events[0].Seq {
		// The journal has this batch's first event already: maybe an
		// earlier try, given up on (a timeout while NATS was away), that
		// landed later.
		rest, lh, ours, err := s.landed(ctx, session, b)
		switch {
		case err != nil:
			return err
		case !ours:
			// Another writer's events: this node's idea of the session is
			// behind its journal (another node ran it while this one's
			// lease lapsed). Fenced, the session leaves memory and loads
			// again from what the journal holds.
			return fmt.Errorf("%w: %w: session %s's journal holds event %d, which this node did not write", ErrFenced, engine.ErrSeqGap, session, b.Events[0].Seq)
		case empty(rest):
			s.stored(session, lh)
			return nil
		}
		b, h = rest, lh
	}
	last, err := engine.CheckBatch(h.seq, b)
	if err != nil {
		return err
	}
	seq, err := s.publishBatch(ctx, session, b, h)
	// Someone wrote after the end this node knew: the session's owner
	// now, or this node's own earlier try landing late, maybe part by
	// part while this one goes on (each try's remaining parts wait to
	// land after its last).
	for try := 0; wrongLast(err) && try < maxLandedTries; try++ {
		s.forgetHead(session)
		rest, lh, ours, lerr := s.landed(ctx, session, b)
		switch {
		case lerr != nil:
			return lerr
		case !ours:
			return fmt.Errorf("%w: session %s: %w", ErrFenced, session, err)
		case empty(rest):
			s.stored(session, lh)
			return nil
		}
		seq, err = s.publishBatch(ctx, session, rest, lh)
	}
	if err != nil {
		if wrongLast(err) {
			s.forgetHead(session)
			return fmt.Errorf("%w: session %s: %w", ErrFenced, session, err)
		}
		return err
	}
	s.stored(session, head{stream: seq, seq: last})
	return nil
}

// maxLandedTries bounds how often an append looks for its own earlier try
// at the journal's end: an earlier try in parts may land one more part
// after each look.
const maxLandedTries = 4

// stored records where session's journal ends once a batch is stored.
func (s *Store) stored(session string, h head) {
	s.mu.Lock()
	s.heads[session] = h
	if len(s.splits) > 0 {
		delete(s.splits, session)
	}
	s.mu.Unlock()
}

// splitTry is a step this node is appending in parts: the seq of the
// journal's last event before it, and the name of its set of parts. The
// tries of one step, until one is stored, share the name.
type splitTry struct {
	after int64
	set   string
}

// publishBatch appends b to session's journal after h, its end (publish),
// in parts when it is larger than a message, and returns the stream
// sequence of its message (its last part).
func (s *Store) publishBatch(ctx context.Context, session string, b engine.Batch, h head) (uint64, error) {
	data, err := encodeBatch(b)
	if err != nil {
		return 0, fmt.Errorf("failed to encode a batch of session %s: %w", session, err)
	}
	var seq uint64
	if limit := s.messageLimit(); len(data) <= limit {
		seq, err = s.publish(ctx, subject(session), data, h.stream)
	} else {
		seq, err = s.publishParts(ctx, session, data, limit, h)
	}
	if err != nil && !wrongLast(err) {
		return 0, fmt.Errorf("failed to append to session %s's journal: %w", session, err)
	}
	return seq, err
}

// messageLimit is the largest payload of a journal message: what the NATS
// server takes (max_payload) and the stream keeps, less the room of a
// publish's headers.
func (s *Store) messageLimit() int {
	limit := min(int(s.nc.MaxPayload()), MaxMessage)
	if m := s.journal.CachedInfo().Config.MaxMsgSize; m > 0 {
		limit = min(limit, int(m))
	}
	return max(limit-partSlack, partSlack)
}

// publishParts stores data, a batch's encoding, in parts of at most limit
// bytes after h, each fenced on the one before, and returns the stream
// sequence of its last part.
func (s *Store) publishParts(ctx context.Context, session string, data []byte, limit int, h head) (uint64, error) {
	s.markFormat2(ctx)
	s.mu.Lock()
	try, ok := s.splits[session]
	if !ok || try.after != h.seq {
		try = splitTry{after: h.seq, set: nuid.Next()}
		s.splits[session] = try
	}
	s.mu.Unlock()
	count := partCount(data, limit, try.set)
	msg := make([]byte, 0, limit)
	seq := h.stream
	for i := 1; i <= count; i++ {
		// A set takes a round trip a part: a lease that lapses meanwhile
		// stops it, as it stops an append.
		if err := s.holds(session); err != nil {
			return 0, err
		}
		msg = appendPart(msg[:0], data, limit, try.set, i, count)
		var err error
		if seq, err = s.publish(ctx, subject(session), msg, seq); err != nil {
			if !wrongLast(err) {
				err = fmt.Errorf("part %d of %d: %w", i, count, err)
			}
			return 0, err
		}
		if afterPart != nil {
			afterPart(i)
		}
	}
	return seq, nil
}

// afterPart, when set, is called after each part is stored (tests).
var afterPart func(index int)

// empty: b holds nothing to append (landed took all of it).
func empty(b engine.Batch) bool { return b.Events == nil && b.State == nil }

// wrongLast reports the server's refusal of a fenced publish: the subject's
// last message was not the one expected.
func wrongLast(err error) bool {
	code := apiErrorCode(err)
	return code == jetstream.JSErrCodeStreamWrongLastSequence || code == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// landed reads the journal's last message, and reports whether it is this
// node's own try of b that landed after the node gave it up (ours): a
// publish times out while NATS is away, and the client sends it once NATS
// is back. Such a try holds the same events from b's first, maybe fewer
// (the engine joins what waited meanwhile into its next try) and then no
// state (only the last batch joined carries one); a step with no event,
// the same state. It returns what of b is left to append (nothing: all of
// it landed) and where the journal ends. A message that is not such a try
// is someone else's, which the caller refuses as it would have.
func (s *Store) landed(ctx context.Context, session string, b engine.Batch) (rest engine.Batch, h head, ours bool, err error) {
	msg, err := s.lastMsg(ctx, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return b, head{}, false, nil
	}
	if err != nil {
		return b, head{}, false, fmt.Errorf("failed to read the end of session %s's journal: %w", session, err)
	}
	h = head{stream: msg.Sequence}
	p, split, err := readPart(msg.Data)
	var got engine.Batch
	switch {
	case err != nil:
	case !split:
		got, err = decodeBatch(msg.Data)
	default:
		s.mu.Lock()
		try, trying := s.splits[session]
		s.mu.Unlock()
		switch {
		case !trying || try.set != p.set:
			return b, head{}, false, nil // another writer's
		case p.index < p.count:
			// A try of b in parts that stopped part way: b goes whole
			// after it.
			h.seq = try.after
			return b, h, true, nil
		}
		// A try in parts that landed whole: read it back.
		var batches []engine.Batch
		if batches, err = s.loadThrough(ctx, session, msg.Sequence); err != nil {
			return b, head{}, false, err
		}
		if len(batches) == 0 {
			return b, head{}, false, fmt.Errorf("%w: session %s's journal ends with a set of parts and holds no batch", engine.ErrCorrupt, session)
		}
		got = batches[len(batches)-1]
	}
	if err != nil {
		return b, head{}, false, fmt.Errorf("%w: session %s, message %d: %w", engine.ErrCorrupt, session, msg.Sequence, err)
	}
	n := len(got.Events)
	switch {
	case n == 0 && len(b.Events) == 0 && got.State != nil && bytes.Equal(got.State, b.State):
		if h.seq, err = s.lastEventSeq(ctx, session, msg.Sequence); err != nil {
			return b, head{}, false, err
		}
	case n == 0 || n > len(b.Events) || n < len(b.Events) && got.State != nil || n == len(b.Events) && !bytes.Equal(got.State, b.State):
		return b, head{}, false, nil
	default:
		for i, ev := range got.Events {
			if ev.Seq != b.Events[i].Seq || !bytes.Equal(ev.Frame, b.Events[i].Frame) {
				return b, head{}, false, nil
			}
		}
		h.seq = got.Events[n-1].Seq
	}
	s.mu.Lock()
	s.heads[session] = h
	s.mu.Unlock()
	if n == len(b.Events) {
		return engine.Batch{}, h, true, nil
	}
	return engine.Batch{Events: b.Events[n:], State: b.State, Agent: b.Agent, Refs: b.Refs}, h, true, nil
}

func (s *Store) forgetHead(session string) {
	s.mu.Lock()
	delete(s.heads, session)
	s.mu.Unlock()
}

// forgetSession forgets what this store knew of a deleted session's
// journal.
func (s *Store) forgetSession(session string) {
	s.mu.Lock()
	delete(s.heads, session)
	delete(s.splits, session)
	s.mu.Unlock()
}

// summaryKey is a summary's key: the owner first, so a browser's sessions
// are one filter.
func summaryKey(owner, session string) string {
	if owner == "" {
		owner = "_"
	}
	return owner + "." + session
}

// Summarize implements engine.Store.
func (s *Store) Summarize(ctx context.Context, sum engine.Summary) error {
	// A node whose lease may have lapsed must not write over the summary
	// of the node that runs the session now, as it must not append.
	if err := s.holds(sum.ID); err != nil {
		return err
	}
	// As the bucket's Put, without the client's decoding of the answer or
	// encoding/json's reflection (two writes a turn), into a buffer with
	// room for the usual summary: its names, two times and the keys.
	data, err := engine.AppendSummary(make([]byte, 0, 192+len(sum.ID)+len(sum.Owner)+len(sum.Title)), sum)
	if err != nil {
		return err
	}
	if err := s.put(ctx, summarySubject+summaryKey(sum.Owner, sum.ID), data); err != nil {
		return fmt.Errorf("failed to store session %s's summary: %w", sum.ID, err)
	}
	return nil
}

// summarySubject is the subjects' prefix of the summaries' bucket: a
// key's Put publishes on it (the bucket has no mirror and the client no
// domain).
const summarySubject = "$KV." + SummaryBucket + "."

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
