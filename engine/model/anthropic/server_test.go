package anthropic

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

const testKey = "sk-ant-test-secret"

// reply is one scripted answer of the fake Messages API.
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

// server is an httptest server speaking the Messages API's SSE. Requests
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
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		s.t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.URL.Path)
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
	opts.BaseURL = srv.URL
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

// SSE frames in the shapes the Messages API documents.

func sse(event, data string) string { return "event: " + event + "\ndata: " + data + "\n\n" }

func messageStart(inputTokens int) string {
	return sse("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+itoa(inputTokens)+`,"output_tokens":1}}}`)
}

func textStart(index int) string {
	return sse("content_block_start", `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"text","text":""}}`)
}

func textDelta(index int, text string) string {
	return sse("content_block_delta", `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"text_delta","text":`+quote(text)+`}}`)
}

func toolStart(index int, id, name, input string) string {
	return sse("content_block_start", `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"tool_use","id":`+quote(id)+`,"name":`+quote(name)+`,"input":`+input+`}}`)
}

func jsonDelta(index int, partial string) string {
	return sse("content_block_delta", `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"input_json_delta","partial_json":`+quote(partial)+`}}`)
}

func blockStop(index int) string {
	return sse("content_block_stop", `{"type":"content_block_stop","index":`+itoa(index)+`}`)
}

func ping() string { return sse("ping", `{"type": "ping"}`) }

func messageDelta(stop string, outputTokens int) string {
	return sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+quote(stop)+`,"stop_sequence":null},"usage":{"output_tokens":`+itoa(outputTokens)+`}}`)
}

func messageStop() string { return sse("message_stop", `{"type":"message_stop"}`) }

func errorEvent(kind, message string) string {
	return sse("error", `{"type":"error","error":{"type":`+quote(kind)+`,"message":`+quote(message)+`}}`)
}

func errorBody(kind, message string) string {
	return `{"type":"error","error":{"type":` + quote(kind) + `,"message":` + quote(message) + `},"request_id":"req_011"}`
}

// textTurn is a whole turn that says parts, one delta each.
func textTurn(parts ...string) []string {
	evs := []string{messageStart(10), textStart(0), ping()}
	for _, p := range parts {
		evs = append(evs, textDelta(0, p))
	}
	return append(evs, blockStop(0), messageDelta("end_turn", 5), messageStop())
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
