package metrics_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/clienttools/gateway/metrics"
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

// A nil *Metrics records nothing and does not panic.
func TestNilMetricsCountNothing(t *testing.T) {
	var m *metrics.Metrics
	m.FrameIn("message")
	m.FrameOut("message")
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
