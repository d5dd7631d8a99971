package fakeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted answer of the fake API.
type Reply struct {
	Status int               // default 200
	Header map[string]string // extra response headers
	Body   string            // the body of an error status
	Events []string          // SSE frames, each written and flushed on its own
	// Gate, when set, is waited for after the event with that index, so a
	// test can prove a delta reached onDelta before the stream went on.
	Gate map[int]chan struct{}
	// Abort drops the connection after the events instead of ending the
	// response cleanly.
	Abort bool
	// Hold keeps the response open after the events, sending nothing,
	// until the client goes away: a stalled server, or a proxy that holds
	// a finished stream open.
	Hold bool
	// ContentType replaces text/event-stream on a 200 answer.
	ContentType string
	// Silent sends nothing, not even headers, until the client goes away:
	// a server that took the request and never answers.
	Silent bool
}

// Server is an httptest server that answers POSTs to one path with its
// scripted replies, in order, and records each request's body and headers.
// Requests beyond the script get its last reply again.
type Server struct {
	*httptest.Server
	t       testing.TB
	path    string
	replies []Reply

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

// NewServer starts a Server for POST path (e.g. "/v1/messages") that is closed
// when t's test ends. A request to any other method or path fails t.
func NewServer(t testing.TB, path string, replies ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, path: path, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if r.URL.Path != s.path || r.Method != http.MethodPost {
		s.t.Errorf("request %s %s, want POST %s", r.Method, r.URL.Path, s.path)
	}
	rp := s.replies[min(n, len(s.replies)-1)]
	if rp.Silent {
		<-r.Context().Done()
		return
	}
	for k, v := range rp.Header {
		w.Header().Set(k, v)
	}
	if rp.Status != 0 && rp.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.Status)
		io.WriteString(w, rp.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if rp.ContentType != "" {
		w.Header().Set("Content-Type", rp.ContentType)
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for i, ev := range rp.Events {
		io.WriteString(w, ev)
		flusher.Flush()
		if g, ok := rp.Gate[i]; ok {
			select {
			case <-g:
			case <-time.After(5 * time.Second):
				s.t.Errorf("event %d: the client did not see the delta before the stream went on", i)
			case <-r.Context().Done():
				return
			}
		}
	}
	if rp.Abort {
		panic(http.ErrAbortHandler)
	}
	if rp.Hold {
		<-r.Context().Done()
	}
}

// Requests returns how many requests the server got.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// Header returns request i's headers.
func (s *Server) Header(i int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[i]
}

// Body returns request i's JSON body decoded.
func (s *Server) Body(i int) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var v map[string]any
	if err := json.Unmarshal(s.bodies[i], &v); err != nil {
		s.t.Fatalf("request %d body is not JSON: %v: %s", i, err, s.bodies[i])
	}
	return v
}
