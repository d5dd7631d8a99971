package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func (s *Store) setUp(ctx context.Context) error {
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		return fmt.Errorf("failed to use JetStream: %w", err)
	}
	where := "the NATS server at " + RedactedURLs(s.opts.URL)
	if s.embedded != nil {
		where = s.opts.DataDir
	}
	if s.opts.Attach {
		return s.attach(ctx, where)
	}
	hint := func(what string, err error) error {
		if refusedReplicas(err) {
			return fmt.Errorf("nats-replicas %d: %s is a single server, which keeps one copy (%w): give it a cluster of %d or more servers, or take --nats-replicas 1", s.opts.Replicas, where, err, s.opts.Replicas)
		}
		if errors.Is(err, errDenied) || ctx.Err() != nil {
			// Refused, or stopped while opening: the data is not the cause.
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
	if s.ownersStream, err = s.js.Stream(ctx, kvStream(OwnersBucket)); err != nil {
		return hint("the session leases", err)
	}
	// Nodes that disagreed on a lease's life would each trust their own:
	// this one renews and trusts its leases by the bucket's.
	s.opts.LeaseTTL = leaseTTL
	if s.opts.URL != "" && s.opts.Replicas > 1 && leaseTTL < minClusterLease {
		s.opts.Logger.Warn("the session leases last less than 10 s: when a NATS server dies, its buckets elect another leader, 4 to 9 s without one, and a lease unrenewed for its time and a fifth meanwhile is lost, so every node may lose its sessions as if it had paused; raise it (deploy.md, --lease-ttl)",
			"lease_ttl", leaseTTL, "bucket", OwnersBucket)
	}
	s.sayWhatWasMissing(ctx)
	if s.journal.CachedInfo().Config.Replicas != s.opts.Replicas {
		s.opts.Logger.Warn("the session journal's stream has another number of replicas than --nats-replicas, which only a new stream takes: change it with the nats CLI (nats stream edit "+JournalStream+" --replicas N) and each bucket's with nats kv",
			"replicas", s.journal.CachedInfo().Config.Replicas, "nats_replicas", s.opts.Replicas)
	}
	return nil
}

// minClusterLease is the shortest lease a cluster's node is not warned
// of: kills of the NATS server leading the leases' bucket (three servers,
// one machine) cost a session its lease in 2 tries of 4 with 5 s leases,
// none in 6 with 10 s; before a renewal took an expired key again, an
// outside audit's cost every node its sessions in 3 of 4 with 5 s.
const minClusterLease = 10 * time.Second

// attach looks up the streams and buckets the gateway made (Options.Attach).
func (s *Store) attach(ctx context.Context, where string) error {
	var err error
	missing := func(what string, err error) error {
		return fmt.Errorf("no gateway store in %s: %s: %w", where, what, err)
	}
	if s.journal, err = s.js.Stream(ctx, JournalStream); err != nil {
		return missing("the session journal", err)
	}
	if s.summaries, err = s.js.KeyValue(ctx, SummaryBucket); err != nil {
		return missing("the session summaries", err)
	}
	if s.summaryStream, err = s.js.Stream(ctx, summaryStreamName); err != nil {
		return missing("the session summaries", err)
	}
	if s.cookies, err = s.js.KeyValue(ctx, CookieBucket); err != nil {
		return missing("the cookie identities", err)
	}
	if s.owners, err = s.js.KeyValue(ctx, OwnersBucket); err != nil {
		return missing("the session leases", err)
	}
	if s.ownersStream, err = s.js.Stream(ctx, kvStream(OwnersBucket)); err != nil {
		return missing("the session leases", err)
	}
	st, err := s.owners.Status(ctx)
	if err != nil {
		return missing("the session leases", err)
	}
	s.opts.LeaseTTL = st.TTL() // the nodes' leases' life, which Own renews by
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
		func(ctx context.Context) (jetstream.Stream, error) {
			return made[jetstream.Stream](s, cfg.Name)(s.js.CreateStream(ctx, cfg))
		},
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
		func(ctx context.Context) (jetstream.KeyValue, error) {
			return made[jetstream.KeyValue](s, kvStream(cfg.Bucket))(s.js.CreateKeyValue(ctx, cfg))
		},
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
		if err == nil {
			level, msg := slog.LevelInfo, "the bucket's entries now live as long as this gateway's flag says (the embedded server's one node decides)"
			if cfg.TTL != 0 && (st.TTL() == 0 || cfg.TTL < st.TTL()) {
				// Shorter: what the longer time kept and the shorter
				// does not goes now. A typo ("72m" for "72h") must not
				// pass as news; of the identities (--retain), it says
				// what goes with them.
				level = slog.LevelWarn
				if cfg.Bucket == CookieBucket {
					msg = "the bucket's entries now live as long as this gateway's flag says, less than before: the browsers' identities older are gone now, and the chats untouched for as long go at the retention sweep a minute after the start; only a backup brings them back"
				}
			}
			s.opts.Logger.Log(ctx, level, msg, "bucket", cfg.Bucket, "was", st.TTL(), "ttl", cfg.TTL)
		}
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

// made records the stream name as made by this start when create
// succeeded: a stream made in a directory that held a store was lost.
func made[T any](s *Store, name string) func(T, error) (T, error) {
	return func(v T, err error) (T, error) {
		if err == nil {
			s.made = append(s.made, name)
		}
		return v, err
	}
}

// lostWhat says what a user loses when a stream of a data directory that
// held a store is gone, and was made anew, empty.
var lostWhat = map[string]string{
	JournalStream:           "every chat stored before is gone",
	kvStream(CookieBucket):  "every browser gets a new identity: their chats stay stored, and no browser can open them",
	kvStream(SummaryBucket): "the lists of chats are empty, though the chats are stored and open by their ids",
}

// sayWhatWasMissing logs, once a start is set up, each part of an embedded
// store that was missing from a data directory that held one (deleted, or
// the disk lost it), and was made anew: the store starts, and the operator
// learns what its users lost.
func (s *Store) sayWhatWasMissing(ctx context.Context) {
	if s.embedded == nil {
		return
	}
	if !s.embedded.held {
		s.opts.Logger.Warn("the data directory held no store: this start made a new, empty one. On a first start that is all; else this is not the directory the chats are in (--data-dir, or the HOME or XDG_STATE_HOME its default follows), and each browser that comes gets a new identity, which replaces its cookie", "dir", s.opts.DataDir)
		return
	}
	for _, name := range s.made {
		lost, ok := lostWhat[name]
		if !ok {
			continue
		}
		if n := s.madeHolds(ctx, name); n > 0 {
			// Its folder was there, its metadata not (deleted, damaged):
			// the server took the messages it found back into the stream
			// made anew.
			s.opts.Logger.Warn("the data directory held the gateway's store, and a part of it had lost its metadata, which was written anew: the messages it held were kept; restore the directory from a backup if any look missing", "part", name, "dir", s.opts.DataDir, "messages", n)
			continue
		}
		s.opts.Logger.Error("the data directory held the gateway's store, but a part of it was missing and was made anew, empty: restore the directory from a backup to get it back", "part", name, "dir", s.opts.DataDir, "lost", lost)
	}
}

// madeHolds is how many messages stream name, made by this start, holds
// (0 when its state does not read).
func (s *Store) madeHolds(ctx context.Context, name string) uint64 {
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return st.CachedInfo().State.Msgs
}
