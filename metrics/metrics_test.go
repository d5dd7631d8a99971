package metrics_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Frames counted from many goroutines reach /metrics under their types,
// each exactly as often as it was counted.
func TestFramesCountedByType(t *testing.T) {
	m := metrics.New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				m.FrameOut("tool.call")
				m.FrameOut("session.idle")
				m.FrameIn("tool.result")
			}
		}()
	}
	wg.Wait()
	m.FrameOut("error")
	want := `
# HELP gateway_frames_sent_total Frames written to pages, by type.
# TYPE gateway_frames_sent_total counter
gateway_frames_sent_total{type="error"} 1
gateway_frames_sent_total{type="session.idle"} 800
gateway_frames_sent_total{type="tool.call"} 800
# HELP gateway_frames_received_total Frames read from pages, by type (invalid: a frame that did not decode, an unknown type or a bad field included).
# TYPE gateway_frames_received_total counter
gateway_frames_received_total{type="tool.result"} 800
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gateway_frames_sent_total", "gateway_frames_received_total"); err != nil {
		t.Error(err)
	}
}

// A nil *Metrics records nothing and does not panic: every method that
// records, called on nil with zero arguments (the engine, the gateway and
// the providers run without metrics in tests and embedded uses). A method
// added without the nil check fails here.
func TestNilMetricsCountNothing(t *testing.T) {
	var m *metrics.Metrics
	v := reflect.ValueOf(m)
	called := 0
	for i := range v.NumMethod() {
		name := v.Type().Method(i).Name
		if name == "Registry" || name == "Handler" { // they serve what a Metrics holds: only called on one
			continue
		}
		method := v.Method(i)
		args := make([]reflect.Value, method.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(method.Type().In(j))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("(*Metrics)(nil).%s panicked: %v", name, p)
				}
			}()
			method.Call(args)
		}()
		called++
	}
	if called < 15 {
		t.Errorf("called %d methods: the test no longer sees the Metrics methods", called)
	}
}

func BenchmarkFrameOut(b *testing.B) {
	m := metrics.New()
	types := []string{"message", "tool.started", "tool.call", "tool.finished", "session.idle"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.FrameOut(types[i%len(types)])
		i++
	}
}

// A call whose start is unknown (loaded from a journal that did not keep
// it) is counted settled, and its duration is left out rather than taken
// from the zero time.
func TestCallOfUnknownDurationCounted(t *testing.T) {
	m := metrics.New()
	m.CallSettled("confirm", "client", "", 1, -1)
	m.CallSettled("confirm", "client", "", 1, 3*time.Second)
	if n := testutil.CollectAndCount(m.Registry(), "gateway_tool_calls_settled_total"); n != 1 {
		t.Errorf("settled series: %d", n)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "gateway_tool_calls_settled_total":
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 2 {
				t.Errorf("settled: %g, want 2", v)
			}
		case "gateway_tool_call_duration_seconds":
			if h := f.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 3 {
				t.Errorf("durations: %d observed, %gs; want 1, 3s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

// gateway_store_failing follows the store's health at each scrape.
func TestStoreFailingFollowsHealth(t *testing.T) {
	m := metrics.New()
	var failing error
	if err := m.WatchStore(func() error { return failing }); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchStore(func() error { return nil }); err == nil {
		t.Error("a second WatchStore was taken; want an error (it panicked before)")
	}
	read := func() string {
		t.Helper()
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "gateway_store_failing" {
				return fmt.Sprint(f.GetMetric()[0].GetGauge().GetValue())
			}
		}
		return "absent"
	}
	if got := read(); got != "0" {
		t.Errorf("while the store takes events: %s, want 0", got)
	}
	failing = errors.New("no space left on device")
	if got := read(); got != "1" {
		t.Errorf("while it refuses them: %s, want 1", got)
	}
	failing = nil
	if got := read(); got != "0" {
		t.Errorf("once it takes them again: %s, want 0", got)
	}
}

// An app that serves its own Prometheus registry, which has the Go
// runtime's and the process's collectors too, serves the gateway's metrics
// beside it through Gatherer; its Registry beside the app's fails on the
// names both have.
func TestGathererBesideAnAppsRegistry(t *testing.T) {
	m := metrics.New()
	m.SessionLoaded(1)
	app := prometheus.NewRegistry()
	app.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := (prometheus.Gatherers{app, m.Registry()}).Gather(); err == nil {
		t.Error("the app's registry and Registry gathered together; want the clash the Go collectors make")
	}
	families, err := prometheus.Gatherers{app, m.Gatherer()}.Gather()
	if err != nil {
		t.Fatalf("the app's registry and Gatherer: %v", err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	if !names["gateway_sessions_loaded"] || !names["go_goroutines"] {
		t.Errorf("gathered %d families, want the gateway's and the app's", len(names))
	}
}
