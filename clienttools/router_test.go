package clienttools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/clienttools/gateway/clienttools"
	"github.com/clienttools/gateway/engine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeConn is a connection whose Send is a function field.
type fakeConn struct {
	send func(frame json.RawMessage) bool
}

func (c *fakeConn) Send(frame json.RawMessage) bool { return c.send(frame) }

// page is a fake connection that records what it was sent, as
// "tool.call c1#1" and "tool.cancel c1#1 timeout".
type page struct {
	conn *fakeConn
	mu   sync.Mutex
	got  []string
	full bool // Send refuses everything, like a connection that cannot keep up
}

func newPage(t *testing.T) *page {
	p := &page{}
	p.conn = &fakeConn{send: func(frame json.RawMessage) bool {
		var f struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Attempt int    `json:"attempt"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(frame, &f); err != nil {
			t.Errorf("frame %s is not JSON: %v", frame, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.full {
			return false
		}
		line := fmt.Sprintf("%s %s#%d", f.Type, f.ID, f.Attempt)
		if f.Reason != "" {
			line += " " + f.Reason
		}
		p.got = append(p.got, line)
		return true
	}}
	return p
}

func (p *page) frames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

const session = "s1"

func call(id, tool string, attempt int) engine.ClientCall {
	return engine.ClientCall{Session: session, ID: id, Name: tool, Arguments: "{}", Attempt: attempt, Attempts: 3, Deadline: "2026-01-02T03:04:05.000Z"}
}

func newRouter() *clienttools.Router {
	return clienttools.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestRouter(t *testing.T) {
	// Every case has pages A and B (attached or not, as the case says) and
	// checks what each was sent.
	tests := []struct {
		name string
		run  func(t *testing.T, r *clienttools.Router, a, b *page)
		want map[string][]string // page name -> frames
	}{
		{
			name: "the newest page that declares the tool gets the call, and only it",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				if r.Holder(session, "c1") != b.conn {
					t.Error("B does not hold c1")
				}
			},
			want: map[string][]string{"B": {"tool.call c1#1"}},
		},
		{
			name: "a newer page without the tool is passed over",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"other"})
				mustDispatch(t, r, call("c1", "t", 1))
			},
			want: map[string][]string{"A": {"tool.call c1#1"}},
		},
		{
			name: "a page that cannot take the frame is passed over",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				b.full = true
				mustDispatch(t, r, call("c1", "t", 1))
			},
			want: map[string][]string{"A": {"tool.call c1#1"}},
		},
		{
			name: "when its page detaches, the call goes to the other page, same attempt",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Detach(session, b.conn)
				if r.Holder(session, "c1") != a.conn {
					t.Error("A does not hold c1")
				}
			},
			want: map[string][]string{"A": {"tool.call c1#1"}, "B": {"tool.call c1#1"}},
		},
		{
			name: "detaching a page that holds nothing moves nothing",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Detach(session, a.conn)
			},
			want: map[string][]string{"B": {"tool.call c1#1"}},
		},
		{
			name: "with no page attached, the call waits and goes to the next page that attaches",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Detach(session, a.conn) // a reload: the tool was declared
				mustDispatch(t, r, call("c1", "t", 1))
				if r.Holder(session, "c1") != nil {
					t.Error("a call with no page has a holder")
				}
				r.Attach(session, b.conn, []string{"t"})
			},
			want: map[string][]string{"B": {"tool.call c1#1"}},
		},
		{
			name: "a detached call waits for a page that declares its tool",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Detach(session, a.conn)
				r.Attach(session, b.conn, []string{"other"})
				if r.Holder(session, "c1") != nil {
					t.Error("a page without the tool holds c1")
				}
			},
			want: map[string][]string{"A": {"tool.call c1#1"}},
		},
		{
			name: "waiting calls are delivered in dispatch order",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Detach(session, a.conn)
				for i := range 20 {
					mustDispatch(t, r, call(fmt.Sprintf("c%02d", i), "t", 1))
				}
				r.Attach(session, b.conn, []string{"t"})
			},
			want: map[string][]string{"B": func() []string {
				var want []string
				for i := range 20 {
					want = append(want, fmt.Sprintf("tool.call c%02d#1", i))
				}
				return want
			}()},
		},
		{
			name: "release with abort sends tool.cancel to the holder only",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Release(session, "c1", 1, engine.CancelTimeout)
				if r.Holder(session, "c1") != nil {
					t.Error("a released call has a holder")
				}
			},
			want: map[string][]string{"B": {"tool.call c1#1", "tool.cancel c1#1 timeout"}},
		},
		{
			name: "release without abort sends nothing, and the call is not delivered again",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Release(session, "c1", 1, "")
				r.Detach(session, b.conn)
			},
			want: map[string][]string{"B": {"tool.call c1#1"}},
		},
		{
			name: "release of a waiting attempt sends nothing, and attach delivers nothing",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Detach(session, a.conn)
				mustDispatch(t, r, call("c1", "t", 1))
				r.Release(session, "c1", 1, engine.CancelTimeout)
				r.Attach(session, b.conn, []string{"t"})
			},
			want: map[string][]string{},
		},
		{
			name: "a stale release is ignored",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Release(session, "c1", 1, engine.CancelTimeout)
				mustDispatch(t, r, call("c1", "t", 2))
				r.Release(session, "c1", 1, engine.CancelTimeout) // attempt 1 again: ignored
				r.Release(session, "nope", 2, engine.CancelTimeout)
				r.Release("other", "c1", 2, engine.CancelTimeout)
				if r.Holder(session, "c1") != b.conn {
					t.Error("the stale release dropped attempt 2")
				}
				r.Detach(session, b.conn) // attempt 2 is still routed
			},
			want: map[string][]string{
				"A": {"tool.call c1#2"},
				"B": {"tool.call c1#1", "tool.cancel c1#1 timeout", "tool.call c1#2"},
			},
		},
		{
			name: "another session's pages get nothing",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach("other", a.conn, []string{"t"})
				r.Attach(session, b.conn, []string{"t"})
				mustDispatch(t, r, call("c1", "t", 1))
				r.Detach(session, b.conn)
			},
			want: map[string][]string{"B": {"tool.call c1#1"}},
		},
		{
			name: "forget drops the session's waiting calls",
			run: func(t *testing.T, r *clienttools.Router, a, b *page) {
				r.Attach(session, a.conn, []string{"t"})
				r.Detach(session, a.conn)
				mustDispatch(t, r, call("c1", "t", 1))
				r.Forget(session)
				r.Attach(session, b.conn, []string{"t"})
			},
			want: map[string][]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter()
			a, b := newPage(t), newPage(t)
			tc.run(t, r, a, b)
			for name, p := range map[string]*page{"A": a, "B": b} {
				if got, want := p.frames(), tc.want[name]; !slices.Equal(got, want) {
					t.Errorf("page %s was sent %q, want %q", name, got, want)
				}
			}
		})
	}
}

func mustDispatch(t *testing.T, r *clienttools.Router, c engine.ClientCall) {
	t.Helper()
	if err := r.Dispatch(c); err != nil {
		t.Fatalf("Dispatch(%s#%d): %v", c.ID, c.Attempt, err)
	}
}

func TestRouterClientUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *clienttools.Router, p *page)
	}{
		{"no page ever attached", func(r *clienttools.Router, p *page) {}},
		{"the pages declare other tools", func(r *clienttools.Router, p *page) { r.Attach(session, p.conn, []string{"other"}) }},
		{"a page of another session declares it", func(r *clienttools.Router, p *page) { r.Attach("other", p.conn, []string{"t"}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter()
			p := newPage(t)
			tc.setup(r, p)
			err := r.Dispatch(call("c1", "t", 1))
			if !errors.Is(err, engine.ErrClientUnavailable) {
				t.Fatalf("Dispatch = %v, want ErrClientUnavailable", err)
			}
			if got := p.frames(); len(got) != 0 {
				t.Errorf("page was sent %q", got)
			}
			if r.Holder(session, "c1") != nil {
				t.Error("an unavailable call has a holder")
			}
		})
	}
}

func TestRouterFrame(t *testing.T) {
	r := newRouter()
	var got json.RawMessage
	r.Attach(session, &fakeConn{send: func(f json.RawMessage) bool { got = f; return true }}, []string{"t"})
	c := call("c1", "t", 2)
	c.Input = engine.ToolInput{Status: engine.InputValid, Value: json.RawMessage(`{}`)}
	mustDispatch(t, r, c)
	var f map[string]any
	if err := json.Unmarshal(got, &f); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "tool.call", "id": "c1", "name": "t", "arguments": "{}", "attempt": 2.0, "attempts": 3.0,
		"deadline": "2026-01-02T03:04:05.000Z", "input": map[string]any{"status": "valid", "value": map[string]any{}}}
	for k, v := range want {
		if fmt.Sprint(f[k]) != fmt.Sprint(v) {
			t.Errorf("tool.call %s = %v, want %v (frame %s)", k, f[k], v, got)
		}
	}
	if _, ok := f["session"]; ok {
		t.Errorf("tool.call carries the session id: %s", got)
	}
}

// TestRouterConcurrent runs attaches, detaches, dispatches and releases at
// once, for the race detector; every attempt was released, so none is
// left with a page.
func TestRouterConcurrent(t *testing.T) {
	r := newRouter()
	pages := make([]*page, 4)
	for i := range pages {
		pages[i] = newPage(t)
	}
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Go(func() {
			for range 50 {
				r.Attach(session, p.conn, []string{"t"})
				r.Detach(session, p.conn)
			}
			if i%2 == 0 {
				r.Attach(session, p.conn, []string{"t"})
			}
		})
	}
	var ids []string
	for i := range 4 {
		for j := range 50 {
			ids = append(ids, fmt.Sprintf("c%d-%d", i, j))
		}
	}
	for i := range 4 {
		wg.Go(func() {
			for _, id := range ids[i*50 : (i+1)*50] {
				if err := r.Dispatch(call(id, "t", 1)); err != nil && !errors.Is(err, engine.ErrClientUnavailable) {
					t.Errorf("Dispatch: %v", err)
				}
				_ = r.Holder(session, id)
				reason := engine.CancelReason("")
				if len(id)%2 == 0 {
					reason = engine.CancelCancelled
				}
				r.Release(session, id, 1, reason)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if r.Holder(session, id) != nil {
			t.Errorf("released %s still has a page", id)
		}
	}
}
