package gatewaytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/static"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/web"
)

// Store names where a test gateway keeps its sessions.
type Store string

const (
	// Memory keeps sessions in memory (engine.NewMemoryStore): the default.
	Memory Store = "memory"
	// JetStream keeps them in an embedded NATS JetStream server in a new
	// temporary directory (or Options.DataDir), as the gateway does by
	// default.
	JetStream Store = "jetstream"
)

// Options say how to build a test gateway. The zero value is the demo:
// the demo's agent on the scripted model's demo script, in memory.
type Options struct {
	// Script is the scripted model's script (docs/scripts.md), as Go.
	Script *scripted.Script
	// ScriptFile is a script file, as --script takes. Ignored with Script.
	ScriptFile string
	// Model answers every model id of the agent, instead of a script.
	Model model.Model
	// Worker decides every step; default demo.Worker("scripted"), whose
	// client tools are the demo page's (get_local_time, confirm, ...).
	Worker engine.Worker
	// Store is Memory (default) or JetStream.
	Store Store
	// DataDir is JetStream's directory; default a new temporary one,
	// removed by Close.
	DataDir string
	// ClientTimeout is the default limit of a client tool's attempt
	// (--client-timeout); default engine.DefaultClientTimeout.
	ClientTimeout time.Duration
	// Clock is the engine's clock: a *clock.Fake steps attempts past their
	// deadlines without waiting. Default the real one.
	Clock clock.Clock
	// PingInterval is how often the gateway pings a page; default the
	// gateway's. -1: never (a test that holds a page still).
	PingInterval time.Duration
	// Logger receives the gateway's logs; default discarded.
	Logger *slog.Logger
	// Addr is where it listens; default "127.0.0.1:0", a free port (URL
	// says which). A port of your own, for a page that must know the
	// gateway's URL before it starts, or a machine with ports set aside.
	Addr string
}

// Gateway is a running test gateway. Its fields are read-only.
type Gateway struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	// Engine is its engine: its sessions, for assertions.
	Engine *engine.Engine

	gw        *gateway.Server
	srv       *http.Server
	served    chan error
	closeData func()

	mu       sync.Mutex
	browsers []*Browser
	closed   bool
}

// Start starts a test gateway and closes it when the test ends.
func Start(t testing.TB, o Options) *Gateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := New(ctx, o)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("gatewaytest: %v", err)
		}
	})
	return g
}

// New starts a test gateway on Options.Addr (127.0.0.1:0). Close stops it.
func New(ctx context.Context, o Options) (*Gateway, error) {
	models, err := resolver(o)
	if err != nil {
		return nil, err
	}
	worker := o.Worker
	if worker == nil {
		worker = demo.Worker("scripted")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g := &Gateway{served: make(chan error, 1), closeData: func() {}}
	page, err := web.Handler(web.PageProps{AssetVersion: static.Version()})
	if err != nil {
		return nil, err
	}
	var store engine.Store
	gopts := gateway.Options{
		PingInterval: o.PingInterval,
		Page:         page,
		Static:       static.FS,
		Logger:       logger,
	}
	switch o.Store {
	case "", Memory:
		store = engine.NewMemoryStore()
	case JetStream:
		dir := o.DataDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "gatewaytest-"); err != nil {
				return nil, fmt.Errorf("gatewaytest: a data directory: %w", err)
			}
			g.closeData = func() { _ = os.RemoveAll(dir) }
		}
		js, err := jetstream.Open(ctx, jetstream.Options{DataDir: dir, CookieLifetime: gateway.CookieLifetime, Logger: logger})
		if err != nil {
			g.closeData()
			return nil, fmt.Errorf("gatewaytest: open JetStream in %s: %w", dir, err)
		}
		removeDir := g.closeData
		g.closeData = func() { _ = js.Close(); removeDir() }
		store, gopts.CookieStore = js, js.Cookies()
	default:
		return nil, fmt.Errorf("gatewaytest: store %q: want %q or %q", o.Store, Memory, JetStream)
	}
	eng, err := engine.New(engine.Options{Worker: worker, Models: models, Store: store, Logger: logger, ClientTimeout: o.ClientTimeout, Clock: o.Clock})
	if err != nil {
		g.closeData()
		return nil, fmt.Errorf("gatewaytest: %w", err)
	}
	g.Engine = eng
	fail := func(err error) (*Gateway, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
		g.closeData()
		return nil, fmt.Errorf("gatewaytest: %w", err)
	}
	if err := eng.Resume(ctx); err != nil {
		return fail(err)
	}
	gopts.Engine = eng
	if g.gw, err = gateway.New(gopts); err != nil {
		return fail(err)
	}
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(err)
	}
	g.URL = "http://" + ln.Addr().String()
	g.srv = &http.Server{Handler: g.gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { g.served <- g.srv.Serve(ln) }()
	return g, nil
}

// resolver is the model every model id of the agent gets.
func resolver(o Options) (model.Resolver, error) {
	m := o.Model
	if m == nil {
		var sm *scripted.Model
		var err error
		switch {
		case o.Script != nil:
			sm, err = scripted.New(*o.Script)
		case o.ScriptFile != "":
			sm, err = scripted.LoadFile(o.ScriptFile)
		default:
			sm, err = scripted.New(scripted.Demo())
		}
		if err != nil {
			return nil, fmt.Errorf("gatewaytest: the script: %w", err)
		}
		m = sm
	}
	return model.ResolverFunc(func(string) (model.Model, error) { return m, nil }), nil
}

// WebSocketURL is its /ws endpoint, ws://127.0.0.1:PORT/ws.
func (g *Gateway) WebSocketURL() string {
	return "ws" + g.URL[len("http"):] + "/ws"
}

// Close closes every page of its browsers, then stops the gateway as
// cmd/gateway does: the listener, the sockets, the sessions, the store.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	browsers := g.browsers
	g.mu.Unlock()
	for _, b := range browsers {
		b.closeAll()
	}
	errs := []error{g.gw.ShutdownServer(ctx, g.srv), g.Engine.Close(ctx)}
	if err := <-g.served; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	g.closeData()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gatewaytest: close: %w", err)
	}
	return nil
}
