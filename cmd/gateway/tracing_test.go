package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/coder/websocket"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracingToACollector: with OTEL_EXPORTER_OTLP_ENDPOINT set, the
// binary sends its spans to that collector over OTLP/HTTP, as
// clienttools-gateway unless OTEL_SERVICE_NAME says otherwise, and its log
// lines of a traced turn carry the trace id. Without it, nothing is sent.
func TestTracingToACollector(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]int{}
	service := ""
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not OTLP traces", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name]++
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	// The exporter reads its settings from the process's environment.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "chat-gateway")
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}
	addr, stop, logs := startGatewayLogs(t, []string{"--log-level", "debug"}, env)
	chatTurn(t, addr, "what's the weather in Tokyo")
	if err := stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"invoke_agent", "chat scripted", "execute_tool get_weather", "attempt"} {
		if spans[name] == 0 {
			t.Errorf("the collector got no %q span; got %v", name, spans)
		}
	}
	if service != "chat-gateway" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
	}
	if !regexp.MustCompile(`msg="tool call settled".* trace_id=[0-9a-f]{32} span_id=[0-9a-f]{16}|trace_id=[0-9a-f]{32} span_id=[0-9a-f]{16}.*msg="tool call settled"`).MatchString(logs.String()) {
		t.Errorf("no log line of the turn carries its trace:\n%s", logs.String())
	}
}

// TestTracingDefaultEndpoint: OTEL_TRACES_EXPORTER=otlp with no endpoint
// sends the spans to the specification's default, plain HTTP on
// localhost:4318, where a local collector listens (the exporter's own
// default would be HTTPS).
func TestTracingDefaultEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Skipf("the default OTLP port is taken here: %v", err)
	}
	got := make(chan string, 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	addr, stop, _ := startGatewayLogs(t, nil, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})
	chatTurn(t, addr, "hello")
	if err := stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}
	select {
	case path := <-got:
		if path != "/v1/traces" {
			t.Errorf("the collector got %s, want /v1/traces", path)
		}
	default:
		t.Fatal("no spans reached http://localhost:4318")
	}
}

// chatTurn opens a new session on the gateway at addr, as a page, sends
// content and reads up to the session.idle that ends its turn.
func chatTurn(t *testing.T, addr, content string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Jar: jar}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	message, _ := json.Marshal(map[string]string{"type": "message", "content": content})
	for _, f := range [][]byte{[]byte(`{"type":"session.open"}`), message} {
		if err := ws.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatal(err)
		}
	}
	for user := false; ; {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ Type string }
		_ = json.Unmarshal(b, &f)
		user = user || f.Type == "message"
		if user && f.Type == "session.idle" {
			return
		}
	}
}
