package httpworker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestWorkerUpLate: a request the worker's address refused (the worker
// starts after the gateway, or is being replaced) is sent again until the
// worker answers, within its deadline, whatever its trigger: it never
// left, so it runs once.
func TestWorkerUpLate(t *testing.T) {
	addr := closedAddr(t)
	refused := make(chan struct{}, 100)
	dialer := &net.Dialer{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, a)
		if err != nil {
			refused <- struct{}{}
		}
		return c, err
	}}
	defer transport.CloseIdleConnections()
	var requests atomic.Int32
	w := newWorker(t, "http://"+addr, Options{Transport: transport})
	for _, trigger := range []engine.Trigger{engine.UserMessage{Message: engine.Message{Role: "user", Content: "hi"}}, execTrigger(time.Now().Add(time.Minute))} {
		t.Run(trigger.TriggerType(), func(t *testing.T) {
			transport.CloseIdleConnections() // no connection to the last subtest's worker
			for len(refused) > 0 {
				<-refused
			}
			decided := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: trigger})
				if err == nil && len(d.Actions) != 1 {
					err = fmt.Errorf("decision %+v, want the worker's", d)
				}
				if err == nil {
					if e, ok := d.Actions[0].(engine.ToolError); ok {
						err = fmt.Errorf("a tool.error: %s", e.Error)
					}
				}
				decided <- err
			}()
			<-refused // the worker is not up yet: refused once at least
			srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				io.WriteString(rw, `{"actions":[{"type":"tool.result","result":"up"}]}`)
			})}
			up, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("the address was taken meanwhile: %v", err)
			}
			go srv.Serve(up)
			defer srv.Close()
			if err := <-decided; err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the worker got %d requests, want one each", n)
	}
}

// TestUnsentCallOfANotTwiceTool: a tool declared idempotent: false whose
// request never left (the worker went down: connection refused) is not
// sent again past its attempt's deadline less a second, so the attempt
// fails as the worker's failure (tool_failed, under its retry policy), not
// as a timeout, which would settle outcome_unknown: "it may have run" of a
// call the worker never got (the round's review).
func TestUnsentCallOfANotTwiceTool(t *testing.T) {
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Trigger struct {
				Type string `json:"type"`
			} `json:"trigger"`
			Proposed json.RawMessage `json:"proposed"`
		}
		_ = json.Unmarshal(body, &req)
		switch req.Trigger.Type {
		case "session.start":
			io.WriteString(w, `{"agent":{"model":"m","tools":[{"name":"pay","idempotent":false,"retry":{"attempts":2,"timeout":"1s"}}]}}`)
		case "message":
			w.Write(req.Proposed)
		default:
			if strings.Contains(string(req.Proposed), "tool.call") {
				down.Store(true) // down after this answer: tool.execute is refused
			}
			w.Write(req.Proposed)
		}
	}))
	defer srv.Close()
	dialer := &net.Dialer{}
	transport := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return dialer.DialContext(ctx, network, a)
	}}
	w := newWorker(t, srv.URL, Options{Transport: transport})
	turns := 0
	m := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		turns++
		if turns == 1 {
			return model.Response{StopReason: model.StopToolUse, ToolUses: []model.ToolUse{{ID: "call_pay", Name: "pay", Arguments: "{}"}}}, nil
		}
		return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
	})
	e, err := engine.New(engine.Options{DecideTimeout: 3 * time.Second, Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil }), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer e.Close(ctx)
	s, err := e.Open(ctx, engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Attach(ctx, engine.AttachOptions{After: s.LastSeq()})
	if err != nil {
		t.Fatal(err)
	}
	defer page.Detach()
	if err := page.Send(ctx, "pay"); err != nil {
		t.Fatal(err)
	}
	var buf []engine.Event
	for {
		select {
		case <-page.Ready():
		case <-time.After(10 * time.Second):
			t.Fatal("stuck")
		case <-ctx.Done():
			t.Fatal("no tool.finished")
		}
		buf = page.Take(buf)
		for _, ev := range buf {
			if ev.Type == engine.EventToolFinished {
				if !strings.Contains(string(ev.Frame), `"code":"tool_failed"`) || !strings.Contains(string(ev.Frame), "could not reach the worker (connection refused)") {
					t.Errorf("tool.finished %s, want tool_failed: the request never left, so the call did not run", ev.Frame)
				}
				return
			}
		}
	}
}
