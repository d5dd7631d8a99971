package clienttools

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/clienttools/gateway/engine"
)

// Conn is one browser connection as the router sees it.
type Conn interface {
	// Send queues a frame without blocking. It reports false when the
	// connection is closing or cannot keep up; the caller then treats the
	// frame as undelivered.
	Send(frame json.RawMessage) bool
}

// Router implements engine.ClientRouter.
type Router struct {
	logger   *slog.Logger
	mu       sync.Mutex
	sessions map[string]*sessionCalls
	seq      uint64 // dispatch order, so waiting attempts go out in call order
}

var _ engine.ClientRouter = (*Router)(nil)

// sessionCalls is one session's pages and the attempts waiting for them.
type sessionCalls struct {
	pages []*page // in attach order; the newest runs new calls
	// declared is every tool a page of the session has declared, kept
	// after the page leaves: a reload mid-call must wait, not fail.
	declared map[string]bool
	pending  map[string]*attempt
}

type page struct {
	conn  Conn
	tools map[string]bool
}

// attempt is a dispatched attempt; page is nil while no connection holds it.
type attempt struct {
	call engine.ClientCall
	page *page
	seq  uint64
}

// NewRouter returns an empty Router. A nil logger means slog.Default().
func NewRouter(logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.Default()
	}
	return &Router{logger: logger, sessions: map[string]*sessionCalls{}}
}

func (r *Router) session(id string) *sessionCalls {
	sc := r.sessions[id]
	if sc == nil {
		sc = &sessionCalls{declared: map[string]bool{}, pending: map[string]*attempt{}}
		r.sessions[id] = sc
	}
	return sc
}

// Dispatch implements engine.ClientRouter.
func (r *Router) Dispatch(call engine.ClientCall) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.session(call.Session)
	if !sc.declared[call.Name] {
		return fmt.Errorf("%w: no page of session %s declared %q", engine.ErrClientUnavailable, call.Session, call.Name)
	}
	r.seq++
	a := &attempt{call: call, seq: r.seq}
	sc.pending[call.ID] = a
	r.deliver(sc, a, nil)
	return nil
}

// deliver hands a waiting attempt to the newest page that runs its tool,
// skipping `not`; with none, it waits for the next Attach.
func (r *Router) deliver(sc *sessionCalls, a *attempt, not *page) {
	for i := len(sc.pages) - 1; i >= 0; i-- {
		p := sc.pages[i]
		if p == not || !p.tools[a.call.Name] {
			continue
		}
		if p.conn.Send(a.call.Frame()) {
			a.page = p
			r.logger.Debug("client call delivered", "session", a.call.Session, "call", a.call.ID, "attempt", a.call.Attempt)
			return
		}
	}
	a.page = nil
	r.logger.Info("client call waiting for a page", "session", a.call.Session, "call", a.call.ID, "tool", a.call.Name, "attempt", a.call.Attempt)
}

// Release implements engine.ClientRouter.
func (r *Router) Release(session, id string, attemptNo int, reason engine.CancelReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.sessions[session]
	if sc == nil {
		return
	}
	a := sc.pending[id]
	if a == nil || a.call.Attempt != attemptNo {
		return
	}
	delete(sc.pending, id)
	if reason != "" && a.page != nil {
		a.page.conn.Send(engine.ToolCancelFrame{ID: id, Attempt: attemptNo, Reason: reason}.Frame())
	}
}

// Attach registers a connection of session that can run tools, and hands
// it every waiting attempt it can run.
func (r *Router) Attach(session string, conn Conn, tools []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.session(session)
	p := &page{conn: conn, tools: make(map[string]bool, len(tools))}
	for _, t := range tools {
		p.tools[t] = true
		sc.declared[t] = true
	}
	sc.pages = append(sc.pages, p)
	for _, a := range sc.inOrder() {
		if a.page == nil && p.tools[a.call.Name] {
			r.deliver(sc, a, nil)
		}
	}
}

// inOrder lists the session's attempts in dispatch order.
func (sc *sessionCalls) inOrder() []*attempt {
	out := make([]*attempt, 0, len(sc.pending))
	for _, a := range sc.pending {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *attempt) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Detach forgets a connection. Attempts it held go to another page of the
// session that runs their tool, or wait for the next Attach; their attempt
// clocks keep running in the engine.
func (r *Router) Detach(session string, conn Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.sessions[session]
	if sc == nil {
		return
	}
	var gone *page
	for i, p := range sc.pages {
		if p.conn == conn {
			gone = p
			sc.pages = append(sc.pages[:i], sc.pages[i+1:]...)
			break
		}
	}
	if gone == nil {
		return
	}
	for _, a := range sc.inOrder() {
		if a.page == gone {
			r.deliver(sc, a, gone)
		}
	}
}

// Forget drops a session that ended.
func (r *Router) Forget(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, session)
}

// Holder reports which connection holds an attempt, for tests and health:
// nil when it waits for a page.
func (r *Router) Holder(session, id string) Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc := r.sessions[session]; sc != nil {
		if a := sc.pending[id]; a != nil && a.page != nil {
			return a.page.conn
		}
	}
	return nil
}
