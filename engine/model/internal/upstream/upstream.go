package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/clock"
)

// Defaults of Limits.
const (
	// DefaultIdle: a local server may think that long over a big prompt
	// before its headers or its first token. The hosted APIs send an event
	// every few seconds.
	DefaultIdle = 10 * time.Minute
	// DefaultMaxBytes is far above what the longest turn streams (a
	// model's 128k output tokens, each delta with its JSON, are about 30
	// MB) and bounds what a server that never ends can make a turn hold.
	DefaultMaxBytes = 64 << 20
	// MaxErrorBody is what is read of an error status's body: the API's
	// explanation is a few hundred bytes; a proxy's page may be more.
	MaxErrorBody = 64 << 10
)

var (
	// ErrStalled: the stream sent no event (pings and comments aside)
	// for Limits.Idle.
	ErrStalled = errors.New("the server sent nothing")
	// ErrTooLarge: the answer passed Limits.MaxBytes.
	ErrTooLarge = errors.New("the answer is too large")
	// ErrNotEventStream: a successful answer that is a page or JSON, not
	// an event stream: a proxy's sign-in page, or a server that ignored
	// "stream": true.
	ErrNotEventStream = errors.New("the server's answer is not an event stream")
)

// Limits bound one answer. The zero value of each field means its default.
type Limits struct {
	// Idle is the longest the stream may send no event (Watch).
	Idle time.Duration
	// MaxBytes bounds the bytes read of one answer's body.
	MaxBytes int64
	// Clock times Idle; default the system's.
	Clock clock.Clock
}

func (l Limits) withDefaults() Limits {
	if l.Idle <= 0 {
		l.Idle = DefaultIdle
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Clock == nil {
		l.Clock = clock.Real{}
	}
	return l
}

// Guard applies l to an answer, as the SDKs' middleware does once the
// request is sent: an error status's body is replaced by its first
// MaxErrorBody bytes, read now; a successful answer that is a page or
// JSON is refused (ErrNotEventStream, the body closed); a stream's body
// ends with ErrTooLarge past MaxBytes. It returns res, changed in place.
func (l Limits) Guard(res *http.Response) (*http.Response, error) {
	if res.StatusCode >= 400 {
		// What could be read is the explanation; a read that failed
		// part way leaves what came before it.
		b, _ := io.ReadAll(io.LimitReader(res.Body, MaxErrorBody))
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		return res, nil
	}
	if t, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); notAStream(t) {
		said := ""
		if t != "text/html" && t != "application/xhtml+xml" {
			// JSON may say why (a proxy that answers its errors with 200).
			b, _ := io.ReadAll(io.LimitReader(res.Body, MaxErrorBody))
			if m := JSONMessage(b); m != "" {
				said = ": " + Message(m)
			}
		}
		res.Body.Close()
		return nil, fmt.Errorf("%w (it is %s, status %d%s): does the server stream?", ErrNotEventStream, clip.Marked(t, 64, "…"), res.StatusCode, said)
	}
	res.Body = &body{ReadCloser: res.Body, max: l.withDefaults().MaxBytes}
	return res, nil
}

// notAStream: a media type no event stream comes as: a page (a proxy's
// sign-in) or JSON (a server that ignored "stream": true). Any other is
// read as a stream, as the SDKs do: a server that labels its stream
// wrongly, or not at all, still streams.
func notAStream(mediaType string) bool {
	switch {
	case mediaType == "text/html", mediaType == "application/xhtml+xml", mediaType == "application/json":
		return true
	default:
		return strings.HasSuffix(mediaType, "+json")
	}
}

// tooLong matches what APIs and local servers say of a prompt longer than
// the model's context window: Claude ("prompt is too long: 208310 tokens >
// 200000 maximum", and "input length and `max_tokens` exceed context
// limit: 178959 + 64000 > 200000" before it), Bedrock ("input is too long
// for requested model"), OpenAI and vLLM ("This model's maximum context
// length is 128000 tokens"), llama.cpp ("the request exceeds the
// available context size"), Gemini ("exceeds the maximum number of tokens
// allowed"), and others' "context window" and "too many tokens"; not a
// parameter named after the context ("max_tokens must be at most the
// model's context length", "'context_size' must be a positive integer").
var tooLong = regexp.MustCompile(`(?i)prompt (is )?too long|input is too long|maximum context length|exceed(s|ed)? (the |your |its )?(available |model's |max |maximum )?context|context (window|size|limit)\b|too many (input )?tokens|exceeds the maximum number of tokens`)

// TooLong reports whether an error answer refuses the prompt as longer
// than the model's context window: OpenAI's code context_length_exceeded
// (and llama.cpp's exceed_context_size_error), or such words in a 400 or
// 413 answer's message (status 0: an error event in the stream).
func TooLong(status int, message string, body []byte) bool {
	var v struct {
		Error struct {
			Code json.RawMessage `json:"code"` // a number on some servers
			Type string          `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && (string(v.Error.Code) == `"context_length_exceeded"` || v.Error.Type == "exceed_context_size_error") {
		return true
	}
	switch status {
	case 0, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return tooLong.MatchString(message)
	}
	return false
}

// JSONMessage is what a JSON answer says went wrong, in the shapes APIs,
// local servers and proxies use: {"error": {"message"}} or {"error": "..."}
// (OpenAI, llama.cpp, Ollama, Anthropic), the error's "type" alone,
// {"message"} (vLLM) and {"detail"} (FastAPI); "" when it says nothing so.
func JSONMessage(b []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	var e struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	var s string
	switch {
	case json.Unmarshal(v.Error, &e) == nil && e.Message != "":
		return e.Message
	case json.Unmarshal(v.Error, &s) == nil && s != "":
		return s
	case e.Type != "":
		return e.Type
	case v.Message != "":
		return v.Message
	case json.Unmarshal(v.Detail, &s) == nil && s != "":
		return s
	}
	return ""
}

// body is a guarded answer's body.
type body struct {
	io.ReadCloser
	max, read int64
}

func (b *body) Read(p []byte) (int, error) {
	if left := b.max - b.read; int64(len(p)) > left {
		if left <= 0 {
			// At the bound: an answer of exactly max bytes ends here.
			var one [1]byte
			if n, err := b.ReadCloser.Read(one[:]); n == 0 {
				return 0, err
			}
			return 0, fmt.Errorf("%w: more than %s", ErrTooLarge, size(b.max))
		}
		p = p[:left]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}

// Watch returns a context, under ctx, that ends once Idle passes with no
// call of progress: a provider calls it at each event of the stream, so
// a server that sends only pings or comments (a proxy's keep-alive before
// a stuck backend) is cut off too, not only one that sends nothing. Its
// cause is then ErrStalled (Stalled reads it). stop ends the watch and the
// context; call it once the attempt is done.
func (l Limits) Watch(ctx context.Context) (watched context.Context, progress func(), stop func()) {
	l = l.withDefaults()
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{limits: l, cancel: cancel, start: l.Clock.Now()}
	w.mu.Lock()
	w.timer = l.Clock.AfterFunc(l.Idle, w.check)
	w.mu.Unlock()
	return ctx, func() { w.last.Store(int64(w.elapsed())) }, w.stop
}

// Stalled returns the ErrStalled that ended ctx, a context of Watch, or
// err when nothing did.
func Stalled(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
		return cause
	}
	return err
}

type watch struct {
	limits Limits
	cancel context.CancelCauseFunc
	start  time.Time    // with its monotonic reading: a step of the wall clock moves no bound
	last   atomic.Int64 // the last progress, as a time.Duration after start

	mu      sync.Mutex
	timer   clock.Timer
	stopped bool
}

// check runs once Idle passed since the timer was set: it ends the
// context, unless progress came since, in which case it waits out the
// rest.
func (w *watch) check() {
	since := w.elapsed() - time.Duration(w.last.Load())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if since < w.limits.Idle {
		w.timer = w.limits.Clock.AfterFunc(w.limits.Idle-since, w.check)
		return
	}
	w.cancel(fmt.Errorf("%w for %s", ErrStalled, w.limits.Idle))
}

// elapsed is the time since the watch began.
func (w *watch) elapsed() time.Duration { return w.limits.Clock.Now().Sub(w.start) }

func (w *watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
	w.cancel(nil)
}

// size says n bytes in MiB when it is whole MiB.
func size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// HTTPClient is the providers' default client: its own connections, and no
// bound on time, which a turn's Watch gives (from the request on, so a
// server that never answers is cut off as one that stops sending), nor on
// bytes, which Guard gives.
func HTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{}
	}
	return &http.Client{Transport: t.Clone()}
}

// MaxMessage bounds an API's explanation as an error carries it: to the
// pages, the worker, the log and the session's journal.
const MaxMessage = 1 << 10

// Message is an API's explanation, cut to MaxMessage bytes.
func Message(s string) string { return clip.Marked(s, MaxMessage, "…") }

// Redact is msg with key, and any part of it of 16 bytes or more that msg
// quotes (a proxy that echoes the key it refused, in whole or cut, its
// prefix stripped), replaced by "[key]": what an API says goes to pages,
// workers and logs, and the key must not. Shorter parts are left: a key's
// kind ("sk-ant-api03-", "sk-proj-") is no secret, and an API that masks a
// key shows it. It reads from the left: of two quoted parts that overlap,
// what is left of the second after the first may be under 16 bytes, and
// stays.
func Redact(msg, key string) string {
	const least = 16
	if len(key) < least {
		return msg
	}
	var out strings.Builder
	written := 0 // msg[:written] is in out
	for i := 0; i+least <= len(msg); {
		n := quotedRun(msg[i:], key, least)
		if n == 0 {
			i++
			continue
		}
		out.WriteString(msg[written:i])
		out.WriteString("[key]")
		i += n
		written = i
	}
	if written == 0 {
		return msg
	}
	out.WriteString(msg[written:])
	return out.String()
}

// quotedRun is the length of the longest start of s, least bytes or more,
// that key holds somewhere; 0 when it holds none that long.
func quotedRun(s, key string, least int) int {
	best := 0
	for from := 0; ; {
		j := strings.Index(key[from:], s[:least])
		if j < 0 {
			return best
		}
		j += from
		n := least
		for n < len(s) && j+n < len(key) && s[n] == key[j+n] {
			n++
		}
		best = max(best, n)
		from = j + 1
	}
}
