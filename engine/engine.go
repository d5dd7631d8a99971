package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/runners"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Options configure an Engine. Zero fields take their defaults.
type Options struct {
	// Worker decides every step. Required.
	Worker Worker
	// Models resolves the agent config's model id. Required.
	Models model.Resolver
	// Store keeps every session's journal, so a session outlives the
	// process and leaves memory when idle. Default: a MemoryStore, which
	// keeps nothing across a restart.
	Store Store
	// Clock is the time source for deadlines, timeouts and backoff. Default:
	// the system clock.
	Clock clock.Clock
	// Logger gets one line per event worth knowing. Default: slog.Default().
	Logger *slog.Logger
	// ClientTimeout is a client attempt's default limit; default 30s. Longer
	// means a lost browser answer holds its turn longer.
	ClientTimeout time.Duration
	// WorkerTimeout is a worker attempt's default limit; default 5m.
	WorkerTimeout time.Duration
	// DecideTimeout bounds the worker's answer to every trigger but
	// tool.execute; default DefaultDecideTimeout (1m). The session waits
	// for it, so keep it short.
	DecideTimeout time.Duration
	// Unload is how long a session stays in memory with no page attached
	// and no work in flight; default DefaultUnload (1m), negative: never.
	// An unloaded session costs nothing but its journal in the Store, and
	// is loaded again when a page returns (Engine.Load). Shorter saves
	// memory; each load reads the session's journal. A session no page
	// ever attached to (the Go API's) stays loaded.
	Unload time.Duration
	// Retain is how long the Store keeps a session after its last user
	// message (or its start); default DefaultRetain (30 days), negative:
	// forever. An expired session is deleted when it is not loaded.
	Retain time.Duration
	// Adopt is how often the engine looks, on a Store that nodes share
	// (Owners), for sessions with work in flight that no node runs (their
	// node died, or stopped and gave their leases back) and loads them, so
	// their timers and their work go on without waiting for a page to ask
	// for them; each look reads the summaries written since the one before
	// (SummaryFeed), and every hour all of them. 0: never (the default;
	// Resume still loads them at the start).
	Adopt time.Duration
	// Drain is how long Close lets worker attempts and sub-agents that are
	// running finish before it unloads their sessions; default 0: none, they are cut and
	// settle by the restart rules (an attempt of a tool that is not
	// idempotent settles interrupted). Sessions with no worker attempt
	// running unload at once. Timed on Clock.
	Drain time.Duration
	// TracerProvider makes the engine's spans (tracing.go); default the
	// global one, otel.GetTracerProvider(), a no-op until one is set (the
	// engine makes no spans at all until then: they would cost each call
	// allocations that record nothing).
	TracerProvider trace.TracerProvider
	// Metrics records what the engine does (metrics.New); nil: nothing.
	Metrics *metrics.Metrics
	// Limits are the agents' limits where their config leaves a field 0;
	// a field 0 here takes DefaultLimits, a negative one means no limit.
	Limits Limits
	// MaxLiveSessions is how many sessions one owner (OpenOptions.Owner: a
	// browser) may have in memory when it opens another; default
	// DefaultMaxLiveSessions (32), negative: no limit. Past it Open fails
	// with ErrLimitExceeded, and so does LoadFor (or LoadOwn) of one of its
	// sessions not in memory, unless another of its sessions with no page
	// and no work for 5 s leaves to make room. Sessions with no page leave
	// memory after Unload, which frees room too.
	MaxLiveSessions int
	// MaxMessageBytes is the longest user message a session takes, in
	// bytes of UTF-8; default DefaultMaxMessageBytes (256 KiB). A longer one
	// is refused with ErrLimitExceeded.
	MaxMessageBytes int
	// MaxPageTools is how many client tools one page may declare; default
	// DefaultMaxPageTools (128). Every name is kept while its page is
	// attached.
	MaxPageTools int
	// ReplayBytes is how much of its latest events a session in memory
	// keeps for the pages that resume (AttachOptions.After), counting each
	// event's frame and 64 bytes for its bookkeeping; default
	// DefaultReplayBytes (64 KiB), negative: every event. A page that
	// resumes from before them, or opens the chat from its start, is
	// replayed from the Store (one Load), so a long chat in memory costs
	// this much, not its whole history.
	ReplayBytes int
	// MaxDepth is how deep sub-agents may nest (a sub-agent of the
	// session's agent is at depth 1); default DefaultMaxDepth (3),
	// negative: no limit. A delegation past it settles its call with
	// subagent_failed. Deeper means one user message may fan out into
	// many more model turns, each with its own guards.
	MaxDepth int
	// MaxFanOut is how many sub-agents one agent may have running at once;
	// default DefaultMaxFanOut (8), negative: no limit. A delegation past
	// it settles its call with subagent_failed.
	MaxFanOut int
	// NewID mints session, call and page ids, and the epoch of each run of
	// a session in memory: each must differ from every other (one that
	// repeats across restarts turns the check of a page's epoch off).
	// Default: 20 random characters.
	NewID func() string
	// Rand returns a float in [0,1) for backoff jitter. Default: math/rand.
	Rand func() float64
}

// Engine runs sessions. It is safe for concurrent use.
type Engine struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*Session
	perOwner map[string]int       // sessions in memory per owner, for MaxLiveSessions
	loading  map[string]*loadCall // loads in progress, one per session
	// owners: whose sessions are that a load for another owner found,
	// at most maxKnownOwners: naming another browser's session again
	// reads nothing (LoadFor).
	owners  map[string]string
	closed  bool
	closing atomic.Bool // Closing or Close was called: pages leave with the process
	wg      sync.WaitGroup
	schemas schemaCache
	runners runners.Pool // the goroutines that run sessions' messages, model turns and worker attempts
	// failing: the sessions in memory whose events wait for the store,
	// each with the error its last append met; lookErr: the look's reads
	// of the store, failing (adoptOrphans).
	failMu  sync.Mutex
	failing map[string]error
	lookErr error
	sweep   clock.Timer // retention
	adopter clock.Timer // Options.Adopt
	look    *look       // what adoptOrphans knows between looks; nil: no look
	tracer  trace.Tracer
	// untilGlobalSet: tracer is the global provider's, which records
	// nothing until otel.SetTracerProvider; make no spans until then.
	untilGlobalSet bool
}

// New returns an Engine. It fails when a required option is missing.
func New(opts Options) (*Engine, error) {
	if opts.Worker == nil {
		return nil, errors.New("engine: Options.Worker is required")
	}
	if opts.Models == nil {
		return nil, errors.New("engine: Options.Models is required")
	}
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClientTimeout <= 0 {
		opts.ClientTimeout = DefaultClientTimeout
	}
	if opts.WorkerTimeout <= 0 {
		opts.WorkerTimeout = DefaultWorkerTimeout
	}
	if opts.DecideTimeout <= 0 {
		opts.DecideTimeout = DefaultDecideTimeout
	}
	if opts.Unload == 0 {
		opts.Unload = DefaultUnload
	}
	if opts.Retain == 0 {
		opts.Retain = DefaultRetain
	}
	opts.Limits = opts.Limits.or(DefaultLimits)
	if opts.MaxLiveSessions == 0 {
		opts.MaxLiveSessions = DefaultMaxLiveSessions
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.ReplayBytes == 0 {
		opts.ReplayBytes = DefaultReplayBytes
	}
	if opts.MaxPageTools <= 0 {
		opts.MaxPageTools = DefaultMaxPageTools
	}
	if opts.NewID == nil {
		opts.NewID = randomID
	}
	if opts.MaxDepth == 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxFanOut == 0 {
		opts.MaxFanOut = DefaultMaxFanOut
	}
	global := opts.TracerProvider == nil
	if global {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	e := &Engine{opts: opts, sessions: map[string]*Session{}, perOwner: map[string]int{}, loading: map[string]*loadCall{},
		tracer: opts.TracerProvider.Tracer(tracerName), untilGlobalSet: global && isUnsetGlobal(opts.TracerProvider)}
	if w, ok := opts.Worker.(*ToolWorker); ok {
		// Its agent is known now: a mistake in it stops the start, not
		// every session's.
		if err := w.check(&e.schemas); err != nil {
			return nil, fmt.Errorf("engine: Options.Worker: %w", err)
		}
	}
	if opts.Retain > 0 {
		e.every(&e.sweep, time.Minute, sweepEvery(opts.Retain), e.sweepExpired) // retention: soon after start, then regularly
	}
	if _, shared := opts.Store.(Owners); shared && opts.Adopt > 0 {
		feed, ok := opts.Store.(SummaryFeed)
		if !ok {
			return nil, errors.New("engine: Options.Adopt needs a Store that is a SummaryFeed, which a shared one (Owners) should be: its nodes would never look for sessions no node runs")
		}
		e.look = &look{feed: feed, busy: map[string]struct{}{}, unadoptable: map[string]time.Time{}}
		e.every(&e.adopter, opts.Adopt, opts.Adopt, e.adoptOrphans)
	}
	return e, nil
}

// Defaults of Options.
const (
	DefaultUnload = time.Minute
	// DefaultMaxLiveSessions is Options.MaxLiveSessions' default.
	DefaultMaxLiveSessions = 32
	DefaultRetain          = 30 * 24 * time.Hour
	// DefaultReplayBytes is Options.ReplayBytes' default.
	DefaultReplayBytes = 64 << 10
)

// OpenOptions describe a new session.
type OpenOptions struct {
	// Owner says who the session belongs to (the gateway: the browser's
	// id); Session.Owner returns it. The engine does not interpret it.
	Owner string
	// ID is the session's id; empty: Options.NewID mints one. An adapter
	// that must find a session again by a key of its own (the AI SDK's
	// chat id) derives the id from that key. The caller must know the id
	// is free: Engine.Load said ErrNoSession. Open refuses, with
	// ErrSessionExists, an id whose session is loaded or loading here.
	ID string
}

// MaxIDBytes is the longest session id: ids are ASCII letters, digits,
// '-' and '_' (CheckID), short enough for any store's keys (a NATS
// subject, whose whole request line is at most 4 KiB).
const MaxIDBytes = 128

// CheckID says why id cannot be a session's id (OpenOptions.ID,
// Options.NewID, Engine.Load): empty, longer than MaxIDBytes, or with
// other characters than ASCII letters, digits, '-' and '_'.
func CheckID(id string) error {
	switch {
	case id == "":
		return errors.New("a session id is empty")
	case len(id) > MaxIDBytes:
		return fmt.Errorf("a session id of %d bytes is longer than %d", len(id), MaxIDBytes)
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("session id %.64q has %q, where ids have ASCII letters, digits, '-' and '_'", id, c)
		}
	}
	return nil
}

// ErrSessionExists: OpenOptions.ID names a session that is in memory.
var ErrSessionExists = errors.New("session already exists")

// Open starts a session: it asks the worker for the agent config
// (session.start), compiles its schemas and resolves its model. A config
// that cannot be used is an error here, not at the first call.
func (e *Engine) Open(ctx context.Context, o OpenOptions) (*Session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrSessionClosed
	}
	if max := e.opts.MaxLiveSessions; o.Owner != "" && max > 0 {
		if n := e.perOwner[o.Owner]; n >= max {
			e.mu.Unlock()
			// Chats it went back to count, though none was refused: n may
			// be past max.
			return nil, fmt.Errorf("%w: this browser has %d sessions in memory here, and opens a new one only with fewer than %d; a session leaves memory %v after its last page left", ErrLimitExceeded, n, max, e.opts.Unload)
		}
	}
	id := o.ID
	if id == "" {
		id = e.opts.NewID()
	}
	if err := CheckID(id); err != nil {
		e.mu.Unlock()
		return nil, &RequestError{What: err.Error(), Err: err}
	}
	if _, loading := e.loading[id]; loading || e.sessions[id] != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("failed to open session %q: %w", id, ErrSessionExists)
	}
	s := newSession(e, id, o.Owner)
	s.created = e.opts.Clock.Now()
	s.updated = s.created
	e.remember(s)
	e.wg.Add(1) // done when the session leaves memory (Session.depart)
	// Counted now, against the owner's share, but given to no one until
	// it holds its lease and has started: Load and Session wait for, or
	// pass over, a session being opened, as one being loaded.
	lc := &loadCall{done: make(chan struct{})}
	e.loading[id] = lc
	e.mu.Unlock()
	lc.s, lc.err = e.open(ctx, s)
	e.loaded(id, lc)
	return lc.s, lc.err
}

// open takes a remembered new session's lease and runs session.start.
func (e *Engine) open(ctx context.Context, s *Session) (*Session, error) {
	own, err := e.own(ctx, s)
	if err != nil {
		e.forget(s)
		e.wg.Done() // no one else has s: it never ran a step
		return nil, fmt.Errorf("failed to open session: %w", err)
	}
	s.ownership = own
	if err := s.start(ctx); err != nil {
		// Its page reads the error's public text: the whole is here.
		s.logger.Warn("session failed to start", "err", err)
		s.End(context.WithoutCancel(ctx), "failed to start")
		_ = e.opts.Store.Delete(context.WithoutCancel(ctx), s.id)
		return nil, fmt.Errorf("failed to open session: %w", err)
	}
	e.opts.Metrics.SessionOpened()
	return s, nil
}

// Session returns a session that is in memory now and has started, by id
// (not one being opened or loaded: Load waits for it); Load also loads one
// from the store.
func (e *Engine) Session(id string) (*Session, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, opening := e.loading[id]; opening {
		return nil, false // not given out before it has started
	}
	s, ok := e.sessions[id]
	return s, ok
}

// Store is the store the engine keeps its sessions in (Options.Store).
func (e *Engine) Store() Store { return e.opts.Store }

// Loaded counts the sessions in memory.
func (e *Engine) Loaded() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// List returns the summaries of owner's sessions, newest first: a
// browser's chats.
func (e *Engine) List(ctx context.Context, owner string) ([]Summary, error) {
	if owner == "" {
		return nil, errors.New("engine: List needs an owner")
	}
	sums, err := e.opts.Store.Summaries(ctx, owner)
	// A session past Retain is gone, though the hourly sweep has not
	// deleted it yet; one in memory is in use, and stays until it leaves.
	// Another owner's never lists (a store's filter is its own business).
	return slices.DeleteFunc(sums, func(sum Summary) bool {
		if sum.Owner != owner {
			return true
		}
		if !e.expired(sum.Updated) {
			return false
		}
		return !e.inMemory(sum.ID)
	}), err
}

// inMemory reports whether session id is in memory here, or being opened
// or loaded: Session gives out only one that has started.
func (e *Engine) inMemory(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessions[id] != nil || e.loading[id] != nil
}

// expired reports whether a session last updated then is past Retain.
func (e *Engine) expired(updated time.Time) bool {
	return e.opts.Retain > 0 && updated.Before(e.opts.Clock.Now().Add(-e.opts.Retain))
}

// Health is nil while the store takes the sessions' events, and the
// store's error while some session's events wait for it, or while the store
// says it is unhealthy (a Store may have a Healthy() error method: the
// JetStream store reports its connection to NATS).
func (e *Engine) Health() error {
	// The store's own word first: when it is down, that is the cause of
	// what the appends met (a lease it could not renew, a timeout).
	if err := e.StoreHealth(); err != nil {
		return err
	}
	e.failMu.Lock()
	defer e.failMu.Unlock()
	for _, err := range e.failing {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	if e.lookErr != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, e.lookErr)
	}
	return nil
}

// lookResult records whether the look's reads of the store fail: nil,
// they work again.
func (e *Engine) lookResult(err error) {
	e.failMu.Lock()
	defer e.failMu.Unlock()
	e.lookErr = err
}

// StoreHealth is what the store says of itself now (its Healthy method,
// when it has one: the connection to NATS, the embedded server's
// JetStream), wrapped in ErrStoreUnavailable; nil when it takes writes or
// cannot say. Unlike Health it leaves out a session's last refused append,
// which only the next append clears: a page asking for a session the
// store must make or read is told at once that it is down, not made to
// wait on it, nor refused once it is back.
func (e *Engine) StoreHealth() error {
	if h, ok := e.opts.Store.(interface{ Healthy() error }); ok {
		if err := h.Healthy(); err != nil {
			return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
	}
	return nil
}

// storeResult records session's last append: nil clears its error. A
// fenced append is not the store's failure: another node took the session
// (its lease lapsed), and it leaves memory here.
func (e *Engine) storeResult(session string, err error) {
	e.failMu.Lock()
	defer e.failMu.Unlock()
	if err == nil || errors.Is(err, ErrFenced) {
		delete(e.failing, session)
		return
	}
	if e.failing == nil {
		e.failing = map[string]error{}
	}
	e.failing[session] = err
}

func (e *Engine) forget(s *Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sessions[s.id] == s {
		delete(e.sessions, s.id)
		e.storeResult(s.id, nil) // what waited goes with it: its journal is the truth
		if e.perOwner[s.owner]--; e.perOwner[s.owner] <= 0 {
			delete(e.perOwner, s.owner)
		}
		e.opts.Metrics.SessionLoaded(-1)
	}
}

// remember counts s, opened or loaded, among the sessions in memory. e.mu
// is held.
func (e *Engine) remember(s *Session) {
	e.sessions[s.id] = s
	e.perOwner[s.owner]++
	e.opts.Metrics.SessionLoaded(1)
}

// Close unloads every session (their journals keep them for the next
// process: a restart or a deploy is not the end of a chat) and waits for
// their goroutines, or for ctx. A session with worker attempts running
// first lets them finish, for up to Drain, so a deploy does not cut them.
func (e *Engine) Close(ctx context.Context) error {
	e.closing.Store(true)
	e.mu.Lock()
	e.closed = true
	open := make([]*Session, 0, len(e.sessions))
	for _, s := range e.sessions {
		open = append(open, s)
	}
	if e.sweep != nil {
		e.sweep.Stop()
	}
	if e.adopter != nil {
		e.adopter.Stop()
	}
	e.mu.Unlock()
	if e.opts.Drain > 0 {
		e.drain(ctx, open)
	}
	for _, s := range open {
		s.unload(ctx)
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		e.runners.Close(true)
		return nil
	case <-ctx.Done():
		e.runners.Close(false)
		return fmt.Errorf("failed to close engine: %w", ctx.Err())
	}
}

// Closing tells the engine that the process is about to close it, before
// the pages' sockets close: from then on a page that leaves does not leave
// on its own. A client attempt it ran is neither moved to another page (all
// are closing) nor judged by its leaving (an idempotent: false tool's
// outcome_unknown): it waits, stored, for the process that loads the
// session next, where it is delivered again, or settles interrupted as
// after a crash. Close implies it; gateway.Server.Shutdown calls it.
func (e *Engine) Closing() { e.closing.Store(true) }

// drain asks each session to unload once no worker attempt and no
// sub-agent of it runs, and
// waits for them for up to Drain.
func (e *Engine) drain(ctx context.Context, open []*Session) {
	for _, s := range open {
		_ = s.post(ctx, func() { s.draining = true })
	}
	up := make(chan struct{})
	timer := e.opts.Clock.AfterFunc(e.opts.Drain, func() { close(up) })
	defer timer.Stop()
	for _, s := range open {
		select {
		case <-s.stopped:
		case <-up:
			return
		case <-ctx.Done():
			return
		}
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}
