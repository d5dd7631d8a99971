package httpworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine"
	"go.opentelemetry.io/otel/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testSecret = []byte("test-secret-0123456789abcdef")

// quiet discards the warnings failed tool calls log.
var quiet = slog.New(slog.DiscardHandler)

// newWorker returns a Worker for url with testSecret, closed with the test.
func newWorker(t *testing.T, url string, o Options) *Worker {
	t.Helper()
	o.URL, o.Secret = url, testSecret
	if o.Logger == nil {
		o.Logger = quiet
	}
	w, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// verified wraps h with the check a real worker makes: the signature must be
// good, else 401.
func verified(h func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := Verify(testSecret, r, body, time.Now(), 0); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":%q}`, err.Error()), http.StatusUnauthorized)
			return
		}
		var req engine.DecideRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":%q}`, err.Error()), http.StatusBadRequest)
			return
		}
		h(w, r, req)
	}
}

func answer(w http.ResponseWriter, d engine.Decision) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(d)
}

func execTrigger(deadline time.Time) engine.ToolExecute {
	t := engine.ToolExecute{
		ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`,
		Input:   engine.ToolInput{Status: engine.InputValid, Value: json.RawMessage(`{"city":"Tokyo"}`)},
		Attempt: 1,
	}
	if !deadline.IsZero() {
		t.Deadline = engine.FormatDeadline(deadline)
	}
	return t
}

func TestDecide(t *testing.T) {
	agent := &engine.AgentConfig{Model: "scripted", Tools: []engine.AgentTool{{Name: "get_weather", Input: engine.Schema(`{"type":"object"}`)}}}
	proposed := engine.Decision{Actions: []engine.Action{
		engine.MessageAppend{Message: engine.Message{Role: "tool", ToolUseID: "call_1", Name: "get_weather", Content: "It's clear in Tokyo."}},
		engine.ModelPrompt{},
	}}
	tests := []struct {
		name     string
		trigger  engine.Trigger
		proposed engine.Decision
		answer   func(req engine.DecideRequest) engine.Decision
		want     engine.Decision
	}{
		{
			name:    "session.start answered with an agent",
			trigger: engine.SessionStart{Session: "s1"},
			answer:  func(engine.DecideRequest) engine.Decision { return engine.Decision{Agent: agent} },
			want:    engine.Decision{Agent: agent},
		},
		{
			name:    "tool.execute answered with typed actions",
			trigger: execTrigger(time.Now().Add(time.Minute)),
			answer: func(engine.DecideRequest) engine.Decision {
				return engine.Decision{Actions: []engine.Action{
					engine.ToolResult{Result: json.RawMessage(`"It's clear in Tokyo."`)},
					engine.ClientEvent{Name: "weather", Data: json.RawMessage(`{"city":"Tokyo"}`)},
				}}
			},
			want: engine.Decision{Actions: []engine.Action{
				engine.ToolResult{Result: json.RawMessage(`"It's clear in Tokyo."`)},
				engine.ClientEvent{Name: "weather", Data: json.RawMessage(`{"city":"Tokyo"}`)},
			}},
		},
		{
			name:     "tool.finished answered with the proposal",
			trigger:  engine.ToolFinished{ID: "call_1", OK: true, Name: "get_weather", Result: `"It's clear in Tokyo."`},
			proposed: proposed,
			answer:   func(req engine.DecideRequest) engine.Decision { return req.Proposed },
			want:     proposed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got engine.DecideRequest
			srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
					http.Error(w, "want a JSON POST", http.StatusBadRequest)
					return
				}
				got = req
				answer(w, tt.answer(req))
			}))
			defer srv.Close()
			w := newWorker(t, srv.URL+"/decide", Options{})

			sent := engine.DecideRequest{Session: "s1", Owner: "alice", Trigger: tt.trigger, Proposed: tt.proposed}
			d, err := w.Decide(context.Background(), sent)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if !reflect.DeepEqual(got.Trigger, sent.Trigger) || got.Session != "s1" || got.Owner != "alice" {
				t.Errorf("worker got %+v, want %+v", got, sent)
			}
			if !sameJSON(t, got.Proposed, sent.Proposed) {
				t.Errorf("worker got proposed %+v, want %+v", got.Proposed, sent.Proposed)
			}
			if !reflect.DeepEqual(d, tt.want) {
				t.Errorf("Decide = %#v, want %#v", d, tt.want)
			}
		})
	}
}

// TestAnswerMayRepeatItsRequest: a worker that returns proposed, as the
// workers' docs advise, is answered whatever the size of the turn's
// results it holds: the answer may be as large as its request and
// MaxResponseBytes more. With the limit alone, a turn whose results passed
// it (two 4 MiB results through a worker of the default limit) failed with
// worker_failed and never reached the model.
func TestAnswerMayRepeatItsRequest(t *testing.T) {
	result := strings.Repeat("r", 8<<10)
	proposed := engine.Decision{Actions: []engine.Action{
		engine.MessageAppend{Message: engine.Message{Role: "tool", ToolUseID: "call_1", Name: "export", Content: result}},
		engine.MessageAppend{Message: engine.Message{Role: "tool", ToolUseID: "call_2", Name: "export", Content: result}},
		engine.ModelPrompt{},
	}}
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, _ *http.Request, req engine.DecideRequest) {
		answer(w, req.Proposed)
	}))
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{MaxResponseBytes: 1024})
	d, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1",
		Trigger: engine.ToolFinished{ID: "call_2", OK: true, Name: "export", Result: quoted(result)}, Proposed: proposed})
	if err != nil {
		t.Fatalf("Decide with an answer of %d KiB and MaxResponseBytes 1 KiB: %v", 16, err)
	}
	if !sameJSON(t, d, proposed) {
		t.Errorf("Decide = %+v, want the proposal", d)
	}
}

// quoted is s as a JSON string.
func quoted(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestRequestIDs: every request carries an id of its own, so the same
// trigger sent twice (a user sending the same text twice in one second) has
// two bodies and two signatures, and a worker that refuses replays refuses
// only replays.
func TestRequestIDs(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]bool{}
	sigs := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ids[body.ID] = strings.HasPrefix(body.ID, "req_")
		sigs[r.Header.Get(HeaderSignature)] = true
		mu.Unlock()
		answer(w, engine.Decision{})
	}))
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{})
	same := engine.DecideRequest{Session: "s1", Trigger: engine.UserMessage{Message: engine.Message{Role: "user", Content: "hello"}}}
	for range 2 {
		if _, err := w.Decide(context.Background(), same); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || len(sigs) != 2 {
		t.Errorf("two identical triggers went out with ids %v and %d signatures; want two ids and two signatures", ids, len(sigs))
	}
	for id, ok := range ids {
		if !ok {
			t.Errorf("request id %q does not start with req_", id)
		}
	}
}

// TestTraceparent: a request made inside a span carries its W3C trace
// context, so the worker's own spans join the trace; outside one, none.
func TestTraceparent(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		answer(w, engine.Decision{})
	}))
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled,
	})
	req := engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}}
	if _, err := w.Decide(trace.ContextWithSpanContext(context.Background(), sc), req); err != nil {
		t.Fatal(err)
	}
	if tp := <-got; tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %q", tp)
	}
	if _, err := w.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if tp := <-got; tp != "" {
		t.Errorf("traceparent %q outside a span, want none", tp)
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestDecideFailures(t *testing.T) {
	down := func() string {
		return "http://" + closedAddr(t)
	}()
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: the worker is down
		ctx     time.Duration    // the context's deadline, as the engine sets one
		want    string           // in the tool error, the returned error and its public text
		said    string           // what the answer said: in the returned error alone, for the log
		wantCtx error            // the returned error also wraps this
	}{
		// Sent again until the deadline (TestWorkerUpLate), then failed.
		{name: "worker down", ctx: 300 * time.Millisecond, want: "could not reach the worker (connection refused)"},
		{
			name:    "not JSON",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "It's sunny!") },
			want:    "the worker's answer is not a decision: want a JSON object such as {\"actions\": [...]}",
			said:    "It's sunny!",
		},
		{
			name:    "empty body",
			handler: func(w http.ResponseWriter, r *http.Request) {},
			want:    "the worker's answer is not a decision: the body is empty",
		},
		{
			name:    "null",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "null") },
			want:    "the worker's answer is not a decision: want a JSON object",
		},
		{
			name:    "misspelt member",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"action":[]}`) },
			want:    `unknown member "action" (a decision has "agent" and "actions")`,
		},
		{
			name: "misspelt member of an action",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"actions":[{"type":"tool.error","error":"x","retriable":true}]}`)
			},
			want: `actions[0]: failed to decode tool.error action: unknown member "retriable"`,
		},
		{
			name: "misspelt member deep in the agent",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"agent":{"model":"m","tools":[{"name":"t"},{"name":"u","inputs":{}}]}}`)
			},
			want: `agent: unknown member "tools[1].inputs"`,
		},
		{
			name: "a member of the wrong kind in the agent",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"agent":{"model":"m","tools":[{"name":"t","idempotent":"yes"}]}}`)
			},
			want: `agent: "tools.idempotent" is a string, want a boolean`,
		},
		{
			name: "an attempt that is not a whole number",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"actions":[{"type":"tool.result","result":1,"attempt":1.5}]}`)
			},
			want: `actions[0]: failed to decode tool.result action: "attempt" is a number, want a whole number`,
		},
		{
			name: "unknown action",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"actions":[{"type":"tool.result","result":1},{"type":"tool.done"}]}`)
			},
			want: `actions[1]: failed to decode action: unknown type "tool.done"`,
		},
		{
			name: "500 with a JSON error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"error":"tool is not a function"}`)
			},
			want: "the worker answered 500 Internal Server Error",
			said: "tool is not a function",
		},
		{
			name: "502 from a proxy, excerpted",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, "<html>\n<body>"+strings.Repeat("upstream down ", 100)+"</body></html>")
			},
			want: "the worker answered 502 Bad Gateway",
			said: "<html> <body>upstream down upstream down",
		},
		{
			name: "a body quoting the secret is redacted",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "secret is "+string(testSecret), http.StatusInternalServerError)
			},
			want: "the worker answered 500 Internal Server Error",
			said: "secret is [redacted]",
		},
		{
			name: "an action's type quoting the secret",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"actions":[{"type":"%s-xyz"}]}`, testSecret)
			},
			want: `unknown type "[redacted]-xyz"`,
		},
		{
			name: "a member's name quoting the secret past the clip",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"%s%s":1}`, strings.Repeat("x", 20), testSecret)
			},
			want: `unknown member "xxxxxxxxxxxxxxxxxxxx[redacted]"`,
		},
		{
			name: "wrong secret",
			handler: func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := Verify([]byte("the worker's secret"), r, body, time.Now(), 0); err != nil {
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprintf(w, `{"error":%q}`, err.Error())
				}
			},
			want: "the worker answered 401 Unauthorized",
			said: "signature does not match",
		},
		{
			name: "redirect not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusTemporaryRedirect)
			},
			want: "the worker answered 307 Temporary Redirect",
		},
		{
			name: "answer too large",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"actions":[{"type":"tool.result","result":%q}]}`, strings.Repeat("x", 2048))
			},
			want: "and the 1 KiB more an answer may hold)",
		},
		{
			name: "slow worker hits the deadline",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body) // the server notices a closed connection once the body is read
				<-r.Context().Done()
			},
			ctx:     100 * time.Millisecond,
			want:    "no answer before the deadline",
			wantCtx: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := down
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				url = srv.URL
			}
			w := newWorker(t, url, Options{MaxResponseBytes: 1024})
			ctx := func() (context.Context, context.CancelFunc) {
				if tt.ctx > 0 {
					return context.WithTimeout(context.Background(), tt.ctx)
				}
				return context.WithCancel(context.Background())
			}

			t.Run("tool.execute", func(t *testing.T) {
				ctx, cancel := ctx()
				defer cancel()
				d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: execTrigger(time.Now().Add(time.Minute))})
				if err != nil {
					t.Fatalf("Decide: %v, want a tool.error decision", err)
				}
				if len(d.Actions) != 1 || d.Agent != nil {
					t.Fatalf("Decide = %+v, want one tool.error", d)
				}
				te, ok := d.Actions[0].(engine.ToolError)
				if !ok {
					t.Fatalf("action is %T, want engine.ToolError", d.Actions[0])
				}
				if !te.Retryable || te.Code != engine.CodeToolFailed {
					t.Errorf("tool.error is %+v, want retryable with code %s", te, engine.CodeToolFailed)
				}
				prefix := "get_weather failed in the worker: "
				if !strings.HasPrefix(te.Error, prefix) || !strings.Contains(te.Error, tt.want) {
					t.Errorf("tool.error says %q, want %q then %q", te.Error, prefix, tt.want)
				}
				if strings.Contains(te.Error, "127.0.0.1") || strings.Contains(te.Error, string(testSecret[:12])) {
					t.Errorf("tool.error %q names the worker's address or the secret; the model reads it", te.Error)
				}
				if tt.said != "" && strings.Contains(te.Error, tt.said) {
					t.Errorf("tool.error %q quotes the worker's answer; the model and the pages read it", te.Error)
				}
			})
			t.Run("session.start", func(t *testing.T) {
				ctx, cancel := ctx()
				defer cancel()
				d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
				if !errors.Is(err, engine.ErrWorker) {
					t.Fatalf("Decide = %+v, %v; want an error wrapping engine.ErrWorker", d, err)
				}
				if tt.wantCtx != nil && !errors.Is(err, tt.wantCtx) {
					t.Errorf("error %q does not wrap %v", err, tt.wantCtx)
				}
				msg := err.Error()
				if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "session.start at "+url) {
					t.Errorf("error %q, want it to name session.start at %s and say %q", msg, url, tt.want)
				}
				if strings.Contains(msg, string(testSecret[:12])) {
					t.Errorf("error %q contains the secret", msg)
				}
				if !strings.Contains(msg, tt.said) {
					t.Errorf("error %q, want it to quote the answer, %q, for the log", msg, tt.said)
				}
				// What pages read of it: no address, nothing the answer said.
				public := engine.PublicText(err)
				if !strings.Contains(public, tt.want) || strings.Contains(public, "127.0.0.1") || tt.said != "" && strings.Contains(public, tt.said) {
					t.Errorf("public text %q, want it to say %q, and neither the address nor %q", public, tt.want, tt.said)
				}
			})
		})
	}
}

// The worker's URL may carry a user and a token in its query: an error
// names it by scheme, host and path only, on every way a request fails.
func TestDecideNamesNoURLSecrets(t *testing.T) {
	addr := closedAddr(t)
	w := newWorker(t, "http://user:pw-in-url@"+addr+"/hook?token=token-in-query", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
	if err == nil || !strings.Contains(err.Error(), "session.start at http://"+addr+"/hook: could not reach the worker") {
		t.Fatalf("Decide = %v; want it to name the worker by scheme, host and path and say it could not be reached", err)
	}
	for _, secret := range []string{"pw-in-url", "token-in-query"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q from the worker's URL", err, secret)
		}
	}
}

func TestDeadline(t *testing.T) {
	type seen struct {
		header    string
		cancelled bool
	}
	tests := []struct {
		name    string
		trigger func(now time.Time) engine.Trigger
		ctx     time.Duration // 0: no deadline on the context
		opts    Options
		// wantHeader is the announced deadline and wantEnd when the request
		// ends, both from the start.
		wantHeader, wantEnd time.Duration
	}{
		{
			name:       "the trigger's deadline, ended a grace later",
			trigger:    func(now time.Time) engine.Trigger { return execTrigger(now.Add(300 * time.Millisecond)) },
			wantHeader: 300 * time.Millisecond,
			wantEnd:    300*time.Millisecond + deadlineGrace,
		},
		{
			name:       "the trigger's deadline, ended by the context during the grace",
			trigger:    func(now time.Time) engine.Trigger { return execTrigger(now.Add(200 * time.Millisecond)) },
			ctx:        400 * time.Millisecond,
			wantHeader: 200 * time.Millisecond,
			wantEnd:    400 * time.Millisecond,
		},
		{
			name:       "the context's deadline when earlier",
			trigger:    func(now time.Time) engine.Trigger { return execTrigger(now.Add(time.Minute)) },
			ctx:        200 * time.Millisecond,
			wantHeader: 200 * time.Millisecond,
			wantEnd:    200 * time.Millisecond,
		},
		{
			name:       "ToolTimeout without either",
			trigger:    func(now time.Time) engine.Trigger { return execTrigger(time.Time{}) },
			opts:       Options{ToolTimeout: 250 * time.Millisecond},
			wantHeader: 250 * time.Millisecond,
			wantEnd:    250 * time.Millisecond,
		},
		{
			name:       "Timeout for other triggers without a context deadline",
			trigger:    func(now time.Time) engine.Trigger { return engine.SessionStart{Session: "s1"} },
			opts:       Options{Timeout: 200 * time.Millisecond},
			wantHeader: 200 * time.Millisecond,
			wantEnd:    200 * time.Millisecond,
		},
		{
			name:       "the context's deadline for other triggers, even past Timeout",
			trigger:    func(now time.Time) engine.Trigger { return engine.SessionStart{Session: "s1"} },
			opts:       Options{Timeout: 100 * time.Millisecond},
			ctx:        300 * time.Millisecond,
			wantHeader: 300 * time.Millisecond,
			wantEnd:    300 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan seen, 1)
			srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, _ engine.DecideRequest) {
				s := seen{header: r.Header.Get(HeaderDeadline)}
				select {
				case <-r.Context().Done():
					s.cancelled = true
				case <-time.After(5 * time.Second):
				}
				got <- s
			}))
			defer srv.Close()
			w := newWorker(t, srv.URL, tt.opts)

			start := time.Now()
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: tt.trigger(start)})
			elapsed := time.Since(start)

			if elapsed < tt.wantEnd-20*time.Millisecond || elapsed > tt.wantEnd+time.Second {
				t.Errorf("Decide returned after %s, want about %s", elapsed, tt.wantEnd)
			}
			s := <-got
			if !s.cancelled {
				t.Errorf("the worker's request was not cancelled at the deadline")
			}
			dl, perr := time.Parse(time.RFC3339Nano, s.header)
			if perr != nil {
				t.Fatalf("%s is %q: %v", HeaderDeadline, s.header, perr)
			}
			if off := dl.Sub(start.Add(tt.wantHeader)); off < -50*time.Millisecond || off > 50*time.Millisecond {
				t.Errorf("%s is %s, %s off the deadline", HeaderDeadline, s.header, off)
			}
			if _, isExec := tt.trigger(start).(engine.ToolExecute); isExec {
				te, ok := onlyToolError(d)
				if err != nil || !ok || !te.Retryable || !strings.HasSuffix(te.Error, "no answer before the deadline") {
					t.Errorf("Decide = %+v, %v; want a retryable tool.error saying the deadline passed", d, err)
				}
			} else if !errors.Is(err, engine.ErrWorker) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Decide = %v, want engine.ErrWorker and context.DeadlineExceeded", err)
			}
		})
	}
}

// TestDeadlineCancelled: the engine ends an attempt by cancelling the context
// (its timeout runs on its own clock); the request ends at once.
func TestDeadlineCancelled(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, _ engine.DecideRequest) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: execTrigger(time.Now().Add(time.Minute))})
	te, ok := onlyToolError(d)
	if err != nil || !ok || !te.Retryable || !strings.HasSuffix(te.Error, "the request was cancelled") {
		t.Errorf("Decide = %+v, %v; want a retryable tool.error saying it was cancelled", d, err)
	}
}

func onlyToolError(d engine.Decision) (engine.ToolError, bool) {
	if len(d.Actions) != 1 {
		return engine.ToolError{}, false
	}
	te, ok := d.Actions[0].(engine.ToolError)
	return te, ok
}

func TestMaxInFlight(t *testing.T) {
	const limit = 2
	arrived := make(chan string, 10)
	release := make(chan struct{})
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		id := req.Trigger.(engine.ToolExecute).ID
		arrived <- id
		<-release
		answer(w, engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"done ` + id + `"`)}}})
	}))
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{MaxInFlight: limit})

	results := make(chan engine.Decision, limit+1)
	call := func(id string) {
		tr := execTrigger(time.Now().Add(time.Minute))
		tr.ID = id
		d, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: tr})
		if err != nil {
			t.Errorf("Decide(%s): %v", id, err)
		}
		results <- d
	}
	var wg sync.WaitGroup
	for i := range limit {
		wg.Go(func() { call(fmt.Sprint("call_", i)) })
	}
	for range limit {
		<-arrived
	}

	// The next request waits for a slot and does not reach the worker.
	wg.Go(func() { call("call_waiting") })
	waitFor(t, func() bool { return w.waiting.Load() == 1 })

	// One whose context ends while it waits gives up without reaching it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	gaveUp := execTrigger(time.Now().Add(time.Minute))
	gaveUp.ID = "call_gave_up"
	d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: gaveUp})
	if te, ok := firstAction(d).(engine.ToolError); err != nil || !ok || !strings.Contains(te.Error, "limit of 2 open tool calls to the worker was reached") {
		t.Errorf("Decide while full = %+v, %v; want a tool.error naming the limit", d, err)
	}
	select {
	case id := <-arrived:
		t.Fatalf("%s reached the worker while %d requests were in flight", id, limit)
	default:
	}

	release <- struct{}{} // one of the first finishes; the waiting one goes in
	if id := <-arrived; id != "call_waiting" {
		t.Fatalf("next arrival is %s, want call_waiting", id)
	}
	close(release)
	wg.Wait()
	close(results)
	for d := range results {
		if _, ok := d.Actions[0].(engine.ToolResult); !ok {
			t.Errorf("Decide = %+v, want a tool.result", d)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKeepAlive(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		answer(w, req.Proposed)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	w := newWorker(t, srv.URL, Options{})
	for range 5 {
		if _, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: engine.SessionEnd{}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests in a row opened %d connections, want 1", n)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string // "" for success
	}{
		{name: "ok", o: Options{URL: "http://127.0.0.1:8787/decide", Secret: testSecret}},
		{name: "no URL", o: Options{Secret: testSecret}, want: "Options.URL is empty"},
		{name: "not http", o: Options{URL: "ftp://example.test/", Secret: testSecret}, want: "want an http or https URL"},
		{name: "relative", o: Options{URL: "/decide", Secret: testSecret}, want: "want an http or https URL"},
		{name: "no host", o: Options{URL: "http:///decide", Secret: testSecret}, want: "has no host"},
		{name: "no secret", o: Options{URL: "http://127.0.0.1:8787/"}, want: "Options.Secret is empty"},
		{name: "negative", o: Options{URL: "http://127.0.0.1:8787/", Secret: testSecret, MaxInFlight: -1}, want: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(tt.o)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				w.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// closedAddr is a loopback address nothing listens on: a connection to it
// is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// firstAction is d's first action, or nil.
func firstAction(d engine.Decision) engine.Action {
	if len(d.Actions) == 0 {
		return nil
	}
	return d.Actions[0]
}
