package httpworker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// TestWorkerUpLate: a request the worker's address refused (the worker
// starts after the gateway, or is being replaced) is sent again until the
// worker answers, within its deadline, whatever its trigger: it never
// left, so it runs once.
func TestWorkerUpLate(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
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
