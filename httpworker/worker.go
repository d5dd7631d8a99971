package httpworker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/jsonfields"
	"github.com/clienttools/gateway/metrics"
	"go.opentelemetry.io/otel/propagation"
)

// Defaults of Options.
const (
	DefaultMaxInFlight      = 64
	DefaultTimeout          = 30 * time.Second
	DefaultToolTimeout      = engine.DefaultWorkerTimeout
	DefaultMaxResponseBytes = 4 << 20
	DefaultIdleConnTimeout  = 30 * time.Second
)

// dialTimeout bounds connecting to the worker, within the request's deadline.
const dialTimeout = 10 * time.Second

// deadlineGrace is how long past a tool.execute's deadline its request may
// run when the context Decide is given has not ended it by then.
const deadlineGrace = time.Second

// excerptBytes bounds how much of a failed answer's body an error quotes.
const excerptBytes = 200

// Options configure a Worker. Zero values take the defaults.
type Options struct {
	// URL is where triggers are POSTed: an absolute http or https URL.
	// Required. Use https, or a loopback or private network, for anything but
	// a local test: the body (the transcript, tool arguments) is signed, not
	// encrypted.
	URL string

	// Secret keys the HMAC that signs every request; the worker verifies it
	// with the same secret. Required. Use at least 32 random bytes. It is
	// never sent, logged or put in an error.
	Secret []byte

	// MaxInFlight bounds the tool.execute requests this Worker has open at
	// once, and apart from them the requests for the other triggers, which
	// a session waits on and which so never wait behind slow tools; a
	// Decide beyond it waits for a slot, as long as its context allows.
	// Default 64 (so at most 128 connections).
	// Raising it lets a slow worker pile up more open connections (and file
	// descriptors) on both sides; lowering it queues tool calls behind each
	// other, so their attempts may time out while waiting.
	MaxInFlight int

	// Timeout bounds a request for every trigger but tool.execute when the
	// context Decide is given has no deadline (the engine's has one: its
	// Options.DecideTimeout). Default 30s. These triggers are decided on the
	// session's goroutine, so the session does nothing else while one waits:
	// a long timeout stalls the session behind a hung worker, a short one
	// fails a worker that is merely slow.
	Timeout time.Duration

	// ToolTimeout bounds a tool.execute request when neither the context nor
	// the trigger has a deadline (the engine always sets the trigger's: the
	// attempt's). Default engine.DefaultWorkerTimeout (5m). A trigger's
	// deadline ends its request 1s late, leaving the engine, whose clock owns
	// the attempt, to time it out first and cancel the context.
	ToolTimeout time.Duration

	// MaxResponseBytes bounds an answer's body beyond the size of its
	// request: an answer may repeat what it was asked (a decision that
	// returns proposed, which holds the turn's results) and add this much.
	// A larger one is a failure. Default 4 MiB. Raising it lets a broken or
	// hostile worker make the gateway buffer that much per request in
	// flight.
	MaxResponseBytes int64

	// IdleConnTimeout is how long a kept-alive connection may sit unused
	// before it is closed. Default 30s. Keep it below the worker's own
	// keep-alive timeout (the Node helper's is 65s): a request sent on a
	// connection the worker is closing at that moment fails, and a POST is
	// not retried by the HTTP client. Ignored when Transport is set.
	IdleConnTimeout time.Duration

	// Transport sends the requests. Default: an *http.Transport owned by the
	// Worker, keeping up to MaxInFlight connections alive, dialling within
	// 10s, honouring HTTP_PROXY/HTTPS_PROXY/NO_PROXY. Set it for custom TLS
	// (a private CA, client certificates); redirects are never followed
	// either way.
	Transport http.RoundTripper

	// Logger receives one warning per failed tool.execute request (which
	// Decide turns into a retryable tool.error, not an error). Default
	// slog.Default().
	Logger *slog.Logger

	// Metrics counts each request by trigger and outcome
	// (gateway_worker_requests_total) and times it; nil: nothing.
	Metrics *metrics.Metrics
}

// Worker is an engine.Worker that decides over HTTP. It is safe for
// concurrent use.
type Worker struct {
	url    string // as configured, for requests
	where  string // scheme://host/path, for messages
	secret []byte
	client *http.Client
	owned  *http.Transport // closed by Close; nil when Options.Transport was given
	// The requests open at once: tool runs, and apart from them the
	// other triggers, which a chat waits on and which must not wait
	// behind slow tools.
	toolSem, decideSem chan struct{}
	timeout            time.Duration
	toolTimeout        time.Duration
	maxBody            int64
	log                *slog.Logger
	metrics            *metrics.Metrics

	waiting atomic.Int64 // Decide calls waiting for a slot; read by tests
}

var _ engine.Worker = (*Worker)(nil)

// New returns a Worker for o, or an error naming the option that is wrong.
func New(o Options) (*Worker, error) {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return nil, errors.New("httpworker: Options.URL is empty")
	case err != nil:
		return nil, fmt.Errorf("httpworker: Options.URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("httpworker: Options.URL %q: want an http or https URL", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("httpworker: Options.URL %q has no host", u.Redacted())
	case len(o.Secret) == 0:
		return nil, errors.New("httpworker: Options.Secret is empty; requests must be signed")
	case o.MaxInFlight < 0, o.Timeout < 0, o.ToolTimeout < 0, o.MaxResponseBytes < 0, o.IdleConnTimeout < 0:
		return nil, errors.New("httpworker: Options has a negative limit; use zero for the default")
	}
	w := &Worker{
		url:         o.URL,
		where:       (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		secret:      append([]byte(nil), o.Secret...),
		toolSem:     make(chan struct{}, orDefault(o.MaxInFlight, DefaultMaxInFlight)),
		decideSem:   make(chan struct{}, orDefault(o.MaxInFlight, DefaultMaxInFlight)),
		timeout:     orDefault(o.Timeout, DefaultTimeout),
		toolTimeout: orDefault(o.ToolTimeout, DefaultToolTimeout),
		maxBody:     orDefault(o.MaxResponseBytes, DefaultMaxResponseBytes),
		log:         o.Logger,
		metrics:     o.Metrics,
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	rt := o.Transport
	if rt == nil {
		n := cap(w.toolSem) + cap(w.decideSem)
		w.owned = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          n,
			MaxIdleConnsPerHost:   n,
			IdleConnTimeout:       orDefault(o.IdleConnTimeout, DefaultIdleConnTimeout),
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
		rt = w.owned
	}
	w.client = &http.Client{
		Transport: rt,
		// A redirected POST would carry the signed transcript elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return w, nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Close closes the idle connections of the Worker's own transport. Requests
// in flight finish; a Decide after Close opens new connections.
func (w *Worker) Close() error {
	if w.owned != nil {
		w.owned.CloseIdleConnections()
	}
	return nil
}

// Decide POSTs req to the worker and returns its decision.
//
// When the request fails (the worker is unreachable, answers non-2xx or
// something that is not a decision, or not before the deadline), a
// tool.execute gets a decision holding one retryable tool.error with code
// tool_failed, so the call's retry policy applies, and a nil error; every
// other trigger gets an error wrapping engine.ErrWorker (and the context's
// error, if that is why).
func (w *Worker) Decide(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
	exec, isExec := req.Trigger.(engine.ToolExecute)
	start := time.Now()
	d, f := w.do(ctx, req, exec, isExec)
	typ := triggerType(req)
	w.metrics.WorkerRequest(typ, f.outcome(), time.Since(start))
	if f == nil {
		return d, nil
	}
	if isExec {
		level := slog.LevelWarn
		if ctx.Err() != nil {
			// The engine ended the attempt (its timeout, a cancel): it
			// ignores this answer, and the failure is not the worker's.
			level = slog.LevelDebug
		}
		w.log.Log(ctx, level, "httpworker: tool.execute failed; answering a retryable tool.error",
			"worker", w.where, "session", req.Session, "tool", exec.Name, "id", exec.ID,
			"attempt", exec.Attempt, "error", f.detail())
		return engine.Decision{Actions: []engine.Action{engine.ToolError{
			Retryable: true,
			Code:      engine.CodeToolFailed,
			Error:     fmt.Sprintf("%s failed in the worker: %s", exec.Name, f.why),
		}}}, nil
	}
	e := &decideError{trigger: typ, where: w.where, f: f}
	if f.cause != nil && (errors.Is(f.cause, context.DeadlineExceeded) || errors.Is(f.cause, context.Canceled)) {
		e.ctx = ctxErr(f.cause)
	}
	return engine.Decision{}, e
}

func ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// failure is why a request to the worker failed: why, which pages and the
// model may read, and for the operator's log what the worker's answer
// said (its error, what in it is not a decision: it may quote the agent's
// config or the worker's internals) and the cause.
type failure struct {
	why   string
	said  string
	cause error
	// unsent: the request never left (no connection): sending it again
	// cannot run its trigger twice.
	unsent bool
	// kind is the outcome the metrics count it as, when its cause does
	// not say (outcome).
	kind string
}

// The outcomes the metrics count that a failure's cause does not tell.
const (
	outcomeHTTPError = "http_error"
	outcomeBadAnswer = "bad_answer"
	outcomeTimeout   = "timeout"
	// outcomeNoSlot: the request's time ran out while it waited for
	// one of the MaxInFlight requests open to end; it was never sent.
	outcomeNoSlot = "no_slot"
)

// cancelledKind is the outcome of a request that ctx's end cut short:
// timeout when the attempt's own timeout ended it (the worker did not
// answer in time), else its cause's (outcome).
func cancelledKind(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), engine.ErrAttemptTimedOut) {
		return outcomeTimeout
	}
	return ""
}

// outcome is what gateway_worker_requests_total counts f as; nil is ok.
func (f *failure) outcome() string {
	switch {
	case f == nil:
		return "ok"
	case f.kind != "":
		return f.kind
	case errors.Is(f.cause, context.DeadlineExceeded):
		return outcomeTimeout
	case errors.Is(f.cause, context.Canceled):
		return "cancelled"
	case f.cause != nil:
		return "unreachable"
	}
	return "failed"
}

func (f *failure) detail() string {
	d := f.why
	if f.said != "" {
		d += ": " + f.said
	}
	if f.cause == nil || errors.Is(f.cause, context.DeadlineExceeded) {
		return d // the deadline's error says no more than why does
	}
	return d + " (" + f.cause.Error() + ")"
}

// decideError is a trigger's failure at the worker (not a tool.execute's):
// its text, for the log, names the worker's address and quotes its answer;
// its public text, which pages read, says what failed alone.
type decideError struct {
	trigger, where string
	f              *failure
	ctx            error // the context's, when that is why
}

func (e *decideError) Error() string {
	if e.ctx != nil {
		return fmt.Sprintf("%v: %s at %s: %s: %v", engine.ErrWorker, e.trigger, e.where, e.f.why, e.ctx)
	}
	return fmt.Sprintf("%v: %s at %s: %s", engine.ErrWorker, e.trigger, e.where, e.f.detail())
}

func (e *decideError) PublicText() string {
	return fmt.Sprintf("%v: %s: %s", engine.ErrWorker, e.trigger, e.f.why)
}

func (e *decideError) Unwrap() []error {
	if e.ctx != nil {
		return []error{engine.ErrWorker, e.ctx}
	}
	return []error{engine.ErrWorker}
}

func (w *Worker) do(ctx context.Context, req engine.DecideRequest, exec engine.ToolExecute, isExec bool) (engine.Decision, *failure) {
	body, err := engine.Marshal(wireRequest{ID: newRequestID(), Session: req.Session, Owner: req.Owner, Trigger: req.Trigger, Proposed: req.Proposed, Parent: req.Parent})
	if err != nil {
		return engine.Decision{}, &failure{why: "the request could not be encoded", cause: err, kind: "failed"}
	}

	deadline, bound := w.deadlines(ctx, exec, isExec)
	ctx, cancel := context.WithDeadline(ctx, bound)
	defer cancel()

	sem, holders := w.decideSem, "decisions to"
	if isExec {
		sem, holders = w.toolSem, "tool calls to"
	}
	if f := w.acquire(ctx, deadline, sem, holders); f != nil {
		return engine.Decision{}, f
	}
	defer func() { <-sem }()

	resp, f := w.send(ctx, req, body, deadline, isExec)
	if f != nil {
		return engine.Decision{}, f
	}
	defer resp.Body.Close()
	limit := w.maxBody + int64(len(body))
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return engine.Decision{}, transportFailure(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		why := fmt.Sprintf("the worker answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		return engine.Decision{}, &failure{why: why, said: w.excerpt(data), kind: outcomeHTTPError}
	}
	if int64(len(data)) > limit {
		return engine.Decision{}, &failure{why: fmt.Sprintf("the worker answered %d %s with a body larger than %s (its request's %s and the %s more an answer may hold)",
			resp.StatusCode, http.StatusText(resp.StatusCode), byteSize(limit), byteSize(int64(len(body))), byteSize(w.maxBody)), kind: outcomeBadAnswer}
	}
	d, err := decodeDecision(data)
	if err != nil {
		// What the error quotes of the answer (a member's name, an
		// action's type, clipped) is read from the answer without the
		// secret, so no part of it is quoted either.
		if _, again := decodeDecision([]byte(w.redact(string(data)))); again != nil {
			err = again
		}
		why := w.redact("the worker's answer is not a decision: " + err.Error())
		return engine.Decision{}, &failure{why: why, said: w.excerpt(data), kind: outcomeBadAnswer}
	}
	return d, nil
}

// A request that could not be sent is tried again after these waits,
// doubling, for unsentFor at most: a worker restarting (a deploy) is back
// within it, while a session whose step waits for a decision does nothing
// else meanwhile. A tool.execute stops unsentMargin before its attempt's
// deadline, so that the attempt fails as the worker's failure (tool_failed,
// retried under its policy) and not as a timeout, which a tool declared
// idempotent: false would take for a call that may have run.
const (
	unsentFirstWait = 100 * time.Millisecond
	unsentMaxWait   = 2 * time.Second
	unsentFor       = 10 * time.Second
	unsentMargin    = time.Second
)

// send POSTs body, signed, and returns the worker's response. A request
// that never left (the worker refused the connection, or its name did not
// resolve: it is not up yet, as when it starts after the gateway, or is
// being replaced) is sent again after a wait, doubling, for unsentFor: it
// cannot have reached the worker, so whatever its trigger it runs at most
// once, and a worker that comes back by then gets it.
func (w *Worker) send(ctx context.Context, req engine.DecideRequest, body []byte, deadline time.Time, isExec bool) (*http.Response, *failure) {
	wait := unsentFirstWait
	until := time.Now().Add(unsentFor)
	if isExec && deadline.Add(-unsentMargin).Before(until) {
		until = deadline.Add(-unsentMargin)
	}
	// A try that would start as the context ends would fail as "no answer
	// before the deadline", hiding why the earlier ones failed.
	if end, ok := ctx.Deadline(); ok && end.Before(until) {
		until = end
	}
	for try := 1; ; try++ {
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
		if err != nil {
			return nil, &failure{why: "the request could not be built", cause: err, kind: "failed"}
		}
		ts := time.Now().Unix()
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept", "application/json")
		hr.Header.Set("User-Agent", "clienttools-gateway-httpworker/1")
		hr.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		hr.Header.Set(HeaderSignature, Sign(w.secret, ts, body))
		hr.Header.Set(HeaderDeadline, engine.FormatDeadline(deadline))
		// The W3C trace context of the span the engine made for this
		// request (the attempt's, or the user message's): nothing when
		// not tracing.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hr.Header))
		resp, err := w.client.Do(hr)
		if err == nil {
			return resp, nil
		}
		f := transportFailure(ctx, err)
		if !f.unsent {
			return nil, f
		}
		if !time.Now().Add(wait).Before(until) {
			return nil, f
		}
		if try == 1 {
			w.log.Warn("httpworker: could not reach the worker; sending the request again for a while",
				"worker", w.where, "session", req.Session, "trigger", triggerType(req), "until", until, "error", f.detail())
		}
		if clock.Sleep(ctx, clock.Real{}, wait) != nil {
			return nil, f
		}
		wait = min(2*wait, unsentMaxWait)
	}
}

// triggerType names req's trigger for the log.
func triggerType(req engine.DecideRequest) string {
	if req.Trigger == nil {
		return "<nil>"
	}
	return req.Trigger.TriggerType()
}

// deadlines returns the deadline to announce to the worker and the one that
// ends the request. Both are the context's deadline when it has one. A
// tool.execute's own deadline is announced when it is earlier, and ends the
// request deadlineGrace later: the engine cancels the context at the
// deadline on its own clock, and a wall-clock timer firing first would turn
// the attempt's timeout into a worker failure. Without either, Timeout or
// ToolTimeout from now is both.
func (w *Worker) deadlines(ctx context.Context, exec engine.ToolExecute, isExec bool) (announce, bound time.Time) {
	ctxDeadline, hasCtx := ctx.Deadline()
	if isExec {
		if t, err := time.Parse(time.RFC3339Nano, exec.Deadline); err == nil && exec.Deadline != "" {
			if hasCtx && ctxDeadline.Before(t) {
				return ctxDeadline, ctxDeadline
			}
			bound = t.Add(deadlineGrace)
			if hasCtx && ctxDeadline.Before(bound) {
				bound = ctxDeadline
			}
			return t, bound
		}
	}
	if hasCtx {
		return ctxDeadline, ctxDeadline
	}
	d := w.timeout
	if isExec {
		d = w.toolTimeout
	}
	t := time.Now().Add(d)
	return t, t
}

// acquire takes a slot of sem (what names its holders), or fails when ctx
// ends first. A request whose deadline has passed once it has its slot
// is not sent, and gives the slot back: the worker would run a tool for
// an attempt whose answer the engine ignores (and may retry).
func (w *Worker) acquire(ctx context.Context, deadline time.Time, sem chan struct{}, what string) *failure {
	waited := false
	select {
	case sem <- struct{}{}:
	default:
		waited = true
		if f := w.wait(ctx, sem, what); f != nil {
			return f
		}
	}
	if time.Now().Before(deadline) {
		return nil
	}
	<-sem
	// The engine ends the attempt on its own clock: answering before it
	// does could settle its timeout as this failure.
	<-ctx.Done()
	if waited {
		return noSlot(ctx, sem, what)
	}
	return &failure{why: "its deadline passed before it could be sent", cause: ctx.Err(), kind: outcomeTimeout}
}

// wait waits for a slot of sem, or fails when ctx ends first.
func (w *Worker) wait(ctx context.Context, sem chan struct{}, what string) *failure {
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) && cancelledKind(ctx) != outcomeTimeout {
		return &failure{why: fmt.Sprintf("the gateway's limit of %d open %s the worker was reached, and this one was cancelled while it waited", cap(sem), what), cause: ctx.Err()}
	}
	return noSlot(ctx, sem, what)
}

// noSlot is the failure of a request whose time ran out before the worker
// saw it: the bound was too low, not the worker slow (no_slot, not
// timeout).
func noSlot(ctx context.Context, sem chan struct{}, what string) *failure {
	return &failure{why: fmt.Sprintf("the gateway's limit of %d open %s the worker was reached, and this one's time ran out while it waited for one of them to end", cap(sem), what), cause: ctx.Err(), kind: outcomeNoSlot}
}

// transportFailure explains an error from sending the request or reading the
// answer.
func transportFailure(ctx context.Context, err error) *failure {
	// The client's error names the request's whole URL: its user and
	// query (a token) must reach no page, nor the log. The failure's
	// message names the worker by scheme, host and path.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &failure{why: "no answer before the deadline", cause: context.DeadlineExceeded}
	case errors.Is(ctx.Err(), context.Canceled):
		return &failure{why: "the request was cancelled", cause: context.Canceled, kind: cancelledKind(ctx)}
	}
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &failure{why: "could not reach the worker (connection refused)", cause: err, unsent: true}
	case errors.As(err, &dns):
		return &failure{why: "could not reach the worker (host not found)", cause: err, unsent: true}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &failure{why: "the worker closed the connection without an answer", cause: err}
	case errors.As(err, &op) && op.Op == "dial":
		return &failure{why: "could not reach the worker", cause: err, unsent: true}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &failure{why: "could not reach the worker in time", cause: err}
	}
	return &failure{why: "the request to the worker failed", cause: err}
}

// decisionFields are the members a decision may have, in order, read from
// engine.Decision's JSON tags so a member the engine adds is accepted here.
var decisionFields = jsonfields.Names(reflect.TypeFor[engine.Decision]())

// decodeDecision reads a decision, refusing what is not a JSON object and
// members a decision does not have (a misspelt "action" would otherwise
// silently decide nothing).
func decodeDecision(data []byte) (engine.Decision, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return engine.Decision{}, errors.New("the body is empty")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return engine.Decision{}, errors.New("want a JSON object such as {\"actions\": [...]}")
	}
	for name := range top {
		if !slices.Contains(decisionFields, name) {
			return engine.Decision{}, fmt.Errorf("unknown member %q (a decision has %s)", clip.Marked(name, 40, "..."), fieldList())
		}
	}
	var d engine.Decision
	if err := json.Unmarshal(data, &d); err != nil {
		return engine.Decision{}, err
	}
	return d, nil
}

func fieldList() string {
	quoted := make([]string, len(decisionFields))
	for i, n := range decisionFields {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, " and ")
}

// redact replaces the secret in s with [redacted]; a secret shorter than
// four bytes is left as it is, as it would redact common words.
func (w *Worker) redact(s string) string {
	if len(w.secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, string(w.secret), "[redacted]")
}

// excerpt quotes a failed answer briefly: the "error" (or "message") string
// of a JSON object, else the start of the body, on one line, without the
// secret.
func (w *Worker) excerpt(data []byte) string {
	var obj struct {
		Error   *string `json:"error"`
		Message *string `json:"message"`
	}
	s := string(data)
	if json.Unmarshal(data, &obj) == nil {
		switch {
		case obj.Error != nil:
			s = *obj.Error
		case obj.Message != nil:
			s = *obj.Message
		}
	}
	s = w.redact(s)
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return clip.Marked(s, excerptBytes, "...")
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// wireRequest is a request's body: the DecideRequest, and an id no other
// request has, so two identical triggers (the same text sent twice in one
// second) never have the same body, nor the same signature, and a worker
// that refuses replays by signature or by id refuses only replays.
type wireRequest struct {
	ID       string          `json:"id"`
	Session  string          `json:"session"`
	Owner    string          `json:"owner,omitempty"`
	Trigger  engine.Trigger  `json:"trigger"`
	Proposed engine.Decision `json:"proposed"`
	// Parent is set on a sub-agent's triggers (docs/subagents.md).
	Parent *engine.ParentCall `json:"parent,omitempty"`
}

// newRequestID returns "req_" and 26 random base32 characters.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
