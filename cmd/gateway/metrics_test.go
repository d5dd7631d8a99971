package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics: a conversation with a worker call, a client call and a
// client call that times out twice, then a scrape of /metrics: the counts
// and the histograms say what happened, with tools, handlers, outcomes and
// codes as labels.
func TestMetrics(t *testing.T) {
	addr, _ := startGateway(t, nil, nil)
	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: hang}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	// converse sends content and reads to the session.idle after it,
	// answering get_local_time and leaving never_answers unanswered.
	converse := func(content string) {
		send(map[string]any{"type": "message", "content": content})
		seen := false
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			var f struct {
				Type, ID, Name string
				Attempt        int
				Message        json.RawMessage
			}
			_ = json.Unmarshal(b, &f)
			var m struct{ Role, Content string }
			_ = json.Unmarshal(f.Message, &m)
			switch {
			case f.Type == "message" && m.Role == "user" && m.Content == content:
				seen = true
			case f.Type == "tool.call" && f.Name == "get_local_time":
				send(map[string]any{"type": "tool.result", "id": f.ID, "attempt": f.Attempt, "result": map[string]string{"time": "12:00", "timeZone": "UTC"}})
			case seen && f.Type == "session.idle":
				return
			}
		}
	}
	send(map[string]any{"type": "session.open", "tools": []string{"get_local_time", "never_answers"}})
	converse("what's the weather in Tokyo")
	converse("what time is it")
	converse("test slow tool") // never_answers: 2 attempts of 1s, then timeout

	families := scrape(t, client, base)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		if families[name] == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		return sampleValue(families, name, labels)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gateway_sessions_opened_total", nil, 1},
		{"gateway_sessions_loaded", nil, 1},
		{"gateway_pages_connected", nil, 1},
		{"gateway_frames_received_total", map[string]string{"type": "session.open"}, 1},
		{"gateway_frames_received_total", map[string]string{"type": "message"}, 3},
		{"gateway_frames_received_total", map[string]string{"type": "tool.result"}, 1},
		{"gateway_frames_sent_total", map[string]string{"type": "tool.call"}, 3},
		{"gateway_frames_sent_total", map[string]string{"type": "tool.cancel"}, 2},
		{"gateway_tool_calls_started_total", map[string]string{"tool": "get_weather", "handler": "worker"}, 1},
		{"gateway_tool_calls_settled_total", map[string]string{"tool": "get_weather", "handler": "worker", "outcome": "ok"}, 1},
		{"gateway_tool_calls_settled_total", map[string]string{"tool": "get_local_time", "handler": "client", "outcome": "ok"}, 1},
		{"gateway_tool_calls_settled_total", map[string]string{"tool": "never_answers", "handler": "client", "outcome": "error", "code": "timeout"}, 1},
		{"gateway_tool_call_attempts", map[string]string{"handler": "client"}, 2}, // a histogram: its count
		{"gateway_client_tool_round_trip_seconds", nil, 1},
		{"gateway_model_turns_total", map[string]string{"model": "scripted", "outcome": "ok"}, 6},
	} {
		if got := value(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// The attempts histogram: the client calls took 1 and 2 attempts.
	for _, m := range families["gateway_tool_call_attempts"].Metric {
		if h := m.GetHistogram(); m.Label[0].GetValue() == "client" && h.GetSampleSum() != 3 {
			t.Errorf("client attempts sum %v, want 3 (1 + 2)", h.GetSampleSum())
		}
	}
	if got := value("gateway_model_tokens_total", map[string]string{"model": "scripted", "direction": "output"}); got <= 0 {
		t.Errorf("output tokens %v, want some", got)
	}
	if got := value("gateway_store_append_seconds", map[string]string{"outcome": "ok"}); got <= 0 {
		t.Errorf("store appends %v, want some", got)
	}
	for name := range families {
		if strings.Contains(name, "session_id") {
			t.Errorf("a metric named for sessions: %s", name)
		}
	}
}

// scrape reads base's /metrics.
func scrape(t *testing.T, client *http.Client, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return families
}

// sampleValue is the value of the first sample of name whose labels
// include labels; 0 when there is none.
func sampleValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return metricValue(m)
	}
	return 0
}

// metricValue is a counter's or gauge's value, or a histogram's count.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestMetricsListen: with --metrics-listen, /metrics is served there and
// not on the chat's listener.
func TestMetricsListen(t *testing.T) {
	metricsAddr := durableFreeAddr(t)
	addr, _ := startGateway(t, []string{"--metrics-listen", metricsAddr}, nil)
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"http://" + metricsAddr + "/metrics", http.StatusOK},
		{"http://" + addr + "/metrics", http.StatusNotFound},
	} {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s = %s, want %d", tc.url, resp.Status, tc.want)
		}
	}
}
