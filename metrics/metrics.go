package metrics

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the gateway's collectors.
type Metrics struct {
	registry *prometheus.Registry

	sessionsLoaded prometheus.Gauge
	sessionsOpened prometheus.Counter
	pages          prometheus.Gauge
	streams        prometheus.Gauge
	framesIn       *prometheus.CounterVec
	framesOut      *prometheus.CounterVec
	// The frame counters by type, looked up once per type, not per frame.
	framesInBy, framesOutBy counterCache
	callsStarted            *prometheus.CounterVec
	callsSettled            *prometheus.CounterVec
	attempts                *prometheus.HistogramVec
	callDuration            *prometheus.HistogramVec
	roundTrip               prometheus.Histogram
	leaseMoves              prometheus.Counter
	modelTurns              *prometheus.CounterVec
	modelRetries            *prometheus.CounterVec
	modelTokens             *prometheus.CounterVec
	modelDuration           *prometheus.HistogramVec
	storeAppend             *prometheus.HistogramVec
	replayRead              *prometheus.HistogramVec
	guards                  *prometheus.CounterVec
	limits                  *prometheus.CounterVec
	workerRequests          *prometheus.CounterVec
	workerSeconds           *prometheus.HistogramVec
}

// Durations from a loopback round trip (100 µs) to a person answering a
// confirm (minutes).
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// New returns the gateway's metrics on a registry of their own, with the Go
// runtime's and the process's collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{registry: reg}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.sessionsLoaded = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_sessions_loaded",
		Help: "Sessions in this node's memory."})
	m.sessionsOpened = prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_sessions_opened_total",
		Help: "New sessions opened on this node."})
	m.pages = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_pages_connected",
		Help: "Browser pages connected to this node: the WebSockets it holds, a page relayed to another node included (counted where its socket is)."})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_http_streams_open",
		Help: "Responses of the HTTP front ends (the AI SDK's /api/chat, AG-UI's /ag-ui) streaming on this node."})
	m.framesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_frames_received_total",
		Help: "Frames read from pages, by type (invalid: a frame that did not decode, an unknown type or a bad field included)."}, []string{"type"})
	m.framesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_frames_sent_total",
		Help: "Frames written to pages, by type."}, []string{"type"})
	m.callsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_tool_calls_started_total",
		Help: "Tool calls started, by tool and handler (worker or client)."}, []string{"tool", "handler"})
	m.callsSettled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_tool_calls_settled_total",
		Help: "Tool calls settled, by tool, handler, outcome (ok or error) and error code."}, []string{"tool", "handler", "outcome", "code"})
	m.attempts = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_tool_call_attempts",
		Help: "Attempts a settled tool call took, by handler.", Buckets: []float64{0, 1, 2, 3, 4, 5, 10}}, []string{"handler"})
	m.callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_tool_call_duration_seconds",
		Help: "From a tool call's start to its settling, retries included, by handler.", Buckets: durationBuckets}, []string{"handler"})
	m.roundTrip = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_client_tool_round_trip_seconds",
		Help: "From a client attempt's delivery to a page to the page's answer.", Buckets: durationBuckets})
	m.leaseMoves = prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_tool_lease_moves_total",
		Help: "Client attempts moved to another page (tool.leased) because their page left or stopped answering."})
	m.modelTurns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_model_turns_total",
		Help: "Model turns, by model and outcome (ok, error or cancelled)."}, []string{"model", "outcome"})
	m.modelRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_model_retries_total",
		Help: "Model requests tried again after a failure (a rate limit, an overload, a connection that failed), by provider."}, []string{"provider"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_model_tokens_total",
		Help: "Tokens the providers reported, by model and direction (input or output)."}, []string{"model", "direction"})
	m.modelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_model_turn_duration_seconds",
		Help: "A model turn's duration, by model.", Buckets: durationBuckets}, []string{"model"})
	m.storeAppend = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_store_append_seconds",
		Help: "One append of a session step to the store, by outcome (ok or error).", Buckets: durationBuckets}, []string{"outcome"})
	m.replayRead = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_replay_store_read_seconds",
		Help: "One read of a session's journal for the replays of pages that resume from before the events the session keeps in memory, by outcome (ok or error).", Buckets: durationBuckets}, []string{"outcome"})
	m.guards = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_guards_tripped_total",
		Help: "Agents stopped by a guard, by guard."}, []string{"guard"})
	m.limits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_limits_hit_total",
		Help: "Requests refused at one of a browser's limits, by limit."}, []string{"limit"})
	m.workerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_worker_requests_total",
		Help: "Requests to the HTTP worker, by trigger and outcome (ok, unreachable, timeout, no_slot, http_error, bad_answer, cancelled, failed)."}, []string{"trigger", "outcome"})
	m.workerSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_worker_request_seconds",
		Help: "A request to the HTTP worker, its tries of an unreachable worker included, to its answer or failure, by trigger (no_slot requests, which it never saw, left out).", Buckets: durationBuckets}, []string{"trigger"})
	for _, c := range []prometheus.Collector{m.sessionsLoaded, m.sessionsOpened, m.pages, m.streams, m.framesIn, m.framesOut,
		m.callsStarted, m.callsSettled, m.attempts, m.callDuration, m.roundTrip, m.leaseMoves, m.modelTurns, m.modelRetries,
		m.modelTokens, m.modelDuration, m.storeAppend, m.replayRead, m.guards, m.limits, m.workerRequests, m.workerSeconds} {
		f(c)
	}
	return m
}

// Registry holds the collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in Prometheus's text format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// SessionLoaded counts a session in (+1) or out of (-1) memory.
func (m *Metrics) SessionLoaded(delta int) {
	if m != nil {
		m.sessionsLoaded.Add(float64(delta))
	}
}

// SessionOpened counts a new session.
func (m *Metrics) SessionOpened() {
	if m != nil {
		m.sessionsOpened.Inc()
	}
}

// PageConnected counts a page in (+1) or out (-1).
func (m *Metrics) PageConnected(delta int) {
	if m != nil {
		m.pages.Add(float64(delta))
	}
}

// StreamOpened counts an HTTP front end's response in (+1) or out (-1).
func (m *Metrics) StreamOpened(delta int) {
	if m != nil {
		m.streams.Add(float64(delta))
	}
}

// FrameIn counts a frame read from a page; typ must come from a fixed set.
func (m *Metrics) FrameIn(typ string) {
	if m != nil {
		m.framesInBy.get(m.framesIn, typ).Inc()
	}
}

// FrameOut counts a frame written to a page.
func (m *Metrics) FrameOut(typ string) {
	if m != nil {
		m.framesOutBy.get(m.framesOut, typ).Inc()
	}
}

// CallStarted counts a tool call's start.
func (m *Metrics) CallStarted(tool, handler string) {
	if m != nil {
		m.callsStarted.WithLabelValues(tool, handler).Inc()
	}
}

// CallSettled counts a settled call: code is "" when it succeeded. took
// is its start to its settling; negative when unknown (a call loaded from
// a journal written before calls kept their start), which the duration
// histogram leaves out.
func (m *Metrics) CallSettled(tool, handler, code string, attempts int, took time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	if code != "" {
		outcome = "error"
	}
	m.callsSettled.WithLabelValues(tool, handler, outcome, code).Inc()
	m.attempts.WithLabelValues(handler).Observe(float64(attempts))
	if took >= 0 {
		m.callDuration.WithLabelValues(handler).Observe(took.Seconds())
	}
}

// RoundTrip records a client attempt's delivery-to-answer time.
func (m *Metrics) RoundTrip(d time.Duration) {
	if m != nil {
		m.roundTrip.Observe(d.Seconds())
	}
}

// LeaseMoved counts a client attempt moved to another page.
func (m *Metrics) LeaseMoved() {
	if m != nil {
		m.leaseMoves.Inc()
	}
}

// ModelTurn records a finished model turn: outcome is ok, error or
// cancelled.
func (m *Metrics) ModelTurn(model, outcome string, inputTokens, outputTokens int, took time.Duration) {
	if m == nil {
		return
	}
	m.modelTurns.WithLabelValues(model, outcome).Inc()
	m.modelTokens.WithLabelValues(model, "input").Add(float64(inputTokens))
	m.modelTokens.WithLabelValues(model, "output").Add(float64(outputTokens))
	m.modelDuration.WithLabelValues(model).Observe(took.Seconds())
}

// ModelRetry records a model request tried again, by provider
// ("anthropic", "openai").
func (m *Metrics) ModelRetry(provider string) {
	if m == nil {
		return
	}
	m.modelRetries.WithLabelValues(provider).Inc()
}

// StoreAppend records one append to the store.
func (m *Metrics) StoreAppend(took time.Duration, err error) {
	if m == nil {
		return
	}
	m.storeAppend.WithLabelValues(outcomeOf(err)).Observe(took.Seconds())
}

// ReplayRead records one read of a journal for replays from the store.
func (m *Metrics) ReplayRead(took time.Duration, err error) {
	if m == nil {
		return
	}
	m.replayRead.WithLabelValues(outcomeOf(err)).Observe(took.Seconds())
}

// outcomeOf is the outcome label of a store's operation.
func outcomeOf(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// GuardTripped counts an agent stopped by guard.
func (m *Metrics) GuardTripped(guard string) {
	if m != nil {
		m.guards.WithLabelValues(guard).Inc()
	}
}

// LimitHit counts a request refused at a browser's limit.
func (m *Metrics) LimitHit(limit string) {
	if m != nil {
		m.limits.WithLabelValues(limit).Inc()
	}
}

// WorkerRequest counts a request to the HTTP worker for a trigger and how
// it ended: ok, unreachable (no answer came: the connection was refused
// or dropped), timeout, no_slot (its time ran out while it waited for one
// of the requests already open to end: never sent), http_error (a status other than 2xx), bad_answer
// (not a decision), cancelled (the engine ended it: the attempt or the
// session ended first) or failed (the gateway could not make it). took:
// its start to its end.
func (m *Metrics) WorkerRequest(trigger, outcome string, took time.Duration) {
	if m != nil {
		m.workerRequests.WithLabelValues(trigger, outcome).Inc()
		if outcome != "no_slot" { // the worker never saw it: its latency is the gateway's queue
			m.workerSeconds.WithLabelValues(trigger).Observe(took.Seconds())
		}
	}
}

// WatchStore makes gateway_store_failing read health (the engine's
// Health) at each scrape: 1 while it returns an error (the session store
// refuses events: what /healthz calls degraded, when /readyz answers
// 503), else 0. Without it the metric is not there, and an alert on it
// never fires. A second call is an error: one Metrics watches one store.
func (m *Metrics) WatchStore(health func() error) error {
	if m == nil {
		return nil
	}
	err := m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_store_failing",
		Help: "1 while the session store refuses events (a full disk, NATS unreachable), else 0."}, func() float64 {
		if health() != nil {
			return 1
		}
		return 0
	}))
	if err != nil {
		return fmt.Errorf("metrics: WatchStore: these metrics watch a store already: %w", err)
	}
	return nil
}

// Gatherer gathers the gateway's own metrics (gateway_*) alone, without
// the Go runtime's and the process's that Registry holds too: for a
// program that serves them beside its own registry, which has those
// already (prometheus.Gatherers{prometheus.DefaultGatherer, m.Gatherer()};
// gathering Registry beside it fails on the names both have).
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		all, err := m.registry.Gather()
		own := all[:0]
		for _, f := range all {
			if strings.HasPrefix(f.GetName(), "gateway_") {
				own = append(own, f)
			}
		}
		return own, err
	})
}

// counterCache holds the counters of a CounterVec with one label by the
// label's value: a frame's count is an atomic add, where WithLabelValues
// hashes the value and takes the vector's lock each time. Its map is
// replaced, never changed, so a lookup takes no lock; the values are a
// bounded set (frame types), so it is replaced a few times at most.
type counterCache struct {
	mu sync.Mutex // held to add a value
	m  atomic.Pointer[map[string]prometheus.Counter]
}

func (c *counterCache) get(vec *prometheus.CounterVec, value string) prometheus.Counter {
	if m := c.m.Load(); m != nil {
		if ctr, ok := (*m)[value]; ok {
			return ctr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if ctr, ok := (*old)[value]; ok {
			return ctr
		}
	}
	next := make(map[string]prometheus.Counter, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	ctr := vec.WithLabelValues(value)
	next[value] = ctr
	c.m.Store(&next)
	return ctr
}
