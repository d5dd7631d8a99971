package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-proj-test-secret"

// reply is one scripted answer of the fake Chat Completions API.
type reply struct {
	status int               // default 200
	header map[string]string // extra response headers
	body   string            // the body of an error status
	events []string          // SSE frames, each written and flushed on its own
	// gate, when set, is waited for after the event with that index, so a
	// test can prove a delta reached onDelta before the stream went on.
	gate map[int]chan struct{}
	// abort drops the connection after the events instead of ending the
	// response cleanly.
	abort bool
}

// server is an httptest server speaking Chat Completions' SSE. Requests
// beyond the script get its last reply again.
type server struct {
	*httptest.Server
	t       *testing.T
	replies []reply

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	s := &server{t: t, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		s.t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	rp := s.replies[min(n, len(s.replies)-1)]
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if rp.status != 0 && rp.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for i, ev := range rp.events {
		io.WriteString(w, ev)
		flusher.Flush()
		if g, ok := rp.gate[i]; ok {
			select {
			case <-g:
			case <-time.After(5 * time.Second):
				s.t.Errorf("event %d: the client did not see the delta before the stream went on", i)
			case <-r.Context().Done():
				return
			}
		}
	}
	if rp.abort {
		panic(http.ErrAbortHandler)
	}
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func (s *server) header(i int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[i]
}

// body returns request i's JSON body decoded.
func (s *server) body(i int) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var v map[string]any
	if err := json.Unmarshal(s.bodies[i], &v); err != nil {
		s.t.Fatalf("request %d body is not JSON: %v: %s", i, err, s.bodies[i])
	}
	return v
}

// sleeper records the waits between attempts instead of sleeping.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newModel builds a Model against srv with a recording sleeper.
func newModel(t *testing.T, srv *server, opts Options) (*Model, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	opts.BaseURL = srv.URL + "/v1"
	opts.HTTPClient = srv.Client()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.sleep
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, sl
}

// SSE frames in the shapes Chat Completions documents.

func data(payload string) string { return "data: " + payload + "\n\n" }

func done() string { return data("[DONE]") }

// chunk wraps one choice delta in a chat.completion.chunk.
func chunk(delta, finish string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = quote(finish)
	}
	return data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-test","system_fingerprint":"fp_1","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}`)
}

func roleChunk() string { return chunk(`{"role":"assistant","content":""}`, "") }

func textChunk(text string) string { return chunk(`{"content":`+quote(text)+`}`, "") }

func finishChunk(reason string) string { return chunk(`{}`, reason) }

func usageChunk(prompt, completion int) string {
	return data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":` + itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `,"total_tokens":` + itoa(prompt+completion) + `}}`)
}

// callStart is a tool call's first fragment: index, id, name.
func callStart(index int, id, name string) string {
	return chunk(`{"tool_calls":[{"index":`+itoa(index)+`,"id":`+quote(id)+`,"type":"function","function":{"name":`+quote(name)+`,"arguments":""}}]}`, "")
}

// callArgs is a later fragment: more of the arguments.
func callArgs(index int, args string) string {
	return chunk(`{"tool_calls":[{"index":`+itoa(index)+`,"function":{"arguments":`+quote(args)+`}}]}`, "")
}

func errorChunk(message string) string {
	return data(`{"error":{"message":` + quote(message) + `,"type":"server_error","param":null,"code":null}}`)
}

func errorBody(message string) string {
	return `{"error":{"message":` + quote(message) + `,"type":"invalid_request_error","param":null,"code":null}}`
}

// textTurn is a whole turn that says parts, one chunk each.
func textTurn(parts ...string) []string {
	evs := []string{roleChunk()}
	for _, p := range parts {
		evs = append(evs, textChunk(p))
	}
	return append(evs, finishChunk("stop"), usageChunk(9, 12), done())
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
