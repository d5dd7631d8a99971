package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
)

// Options configure an Engine. Zero fields take their defaults.
type Options struct {
	// Worker decides every step. Required.
	Worker Worker
	// Models resolves the agent config's model id. Required.
	Models model.Resolver
	// Store keeps events for replay. Default: a MemoryStore.
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
	// tool.execute; default 1m. The session waits for it, so keep it short.
	DecideTimeout time.Duration
	// SessionIdle is how long a session lives once its last page has left
	// before it ends (reason "abandoned"); default 15m, negative: never. A
	// reload or a network drop reconnects well within it; longer keeps
	// abandoned chats in memory. A session no page ever attached to (the
	// Go API's) does not expire.
	SessionIdle time.Duration
	// MaxPageTools is how many client tools one page may declare; default
	// DefaultMaxPageTools (128). Every name is kept while its page is
	// attached.
	MaxPageTools int
	// NewID mints session and call ids. Default: 20 random characters.
	NewID func() string
	// Rand returns a float in [0,1) for backoff jitter. Default: math/rand.
	Rand func() float64
}

// Engine runs sessions. It is safe for concurrent use.
type Engine struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
	wg       sync.WaitGroup
	schemas  schemaCache
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
		opts.DecideTimeout = time.Minute
	}
	if opts.SessionIdle == 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.MaxPageTools <= 0 {
		opts.MaxPageTools = DefaultMaxPageTools
	}
	if opts.NewID == nil {
		opts.NewID = randomID
	}
	return &Engine{opts: opts, sessions: map[string]*Session{}}, nil
}

// DefaultSessionIdle is how long a session outlives its last page.
const DefaultSessionIdle = 15 * time.Minute

// OpenOptions describe a new session.
type OpenOptions struct {
	// Owner says who the session belongs to (the gateway: the browser's
	// id); Session.Owner returns it. The engine does not interpret it.
	Owner string
}

// Open starts a session: it asks the worker for the agent config
// (session.start), compiles its schemas and resolves its model. A config
// that cannot be used is an error here, not at the first call.
func (e *Engine) Open(ctx context.Context, o OpenOptions) (*Session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrSessionClosed
	}
	s := newSession(e, e.opts.NewID(), o.Owner)
	e.sessions[s.id] = s
	e.wg.Add(1)
	e.mu.Unlock()

	go func() {
		defer e.wg.Done()
		s.run()
	}()
	if err := s.start(ctx); err != nil {
		s.End(context.WithoutCancel(ctx), "failed to start")
		return nil, fmt.Errorf("failed to open session: %w", err)
	}
	return s, nil
}

// Session returns an open session by id.
func (e *Engine) Session(id string) (*Session, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[id]
	return s, ok
}

// Sessions counts the open sessions.
func (e *Engine) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

func (e *Engine) forget(s *Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sessions, s.id)
}

// Close ends every session (reason "shutdown") and waits for their
// goroutines, or for ctx.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	open := make([]*Session, 0, len(e.sessions))
	for _, s := range e.sessions {
		open = append(open, s)
	}
	e.mu.Unlock()
	for _, s := range open {
		s.End(ctx, "shutdown")
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("failed to close engine: %w", ctx.Err())
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}
