package anthropic

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
	"github.com/clienttools/gateway/engine/model/internal/upstream"
)

// generateUntilText runs Generate on its own goroutine, for a test that
// moves a fake clock meanwhile, and returns once the first text came.
func generateUntilText(t *testing.T, m *Model) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	text := make(chan struct{}, 1)
	go func() {
		_, err := m.Generate(context.Background(), request(), func(string) {
			select {
			case text <- struct{}{}:
			default:
			}
		})
		done <- err
	}()
	select {
	case <-text:
	case err := <-done:
		t.Fatalf("Generate ended before any text: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no text came")
	}
	return done
}

// A stream that sends no event (its pings aside) is cut off after
// StreamIdleTimeout, and not tried again: the same server would keep the
// user waiting as long again.
func TestGenerateStalledStream(t *testing.T) {
	srv := newServer(t, reply{Events: []string{messageStart(1), textStart(0), textDelta(0, "Let me"), ping()}, Hold: true}, reply{Events: textTurn("again")})
	c := clock.NewFake(time.Unix(1000, 0))
	m, sl := newModel(t, srv, Options{StreamIdleTimeout: time.Minute, Clock: c})
	done := generateUntilText(t, m)
	c.Advance(time.Minute)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream silent past StreamIdleTimeout was not cut off")
	}
	var me *model.Error
	if !errors.As(err, &me) || !me.Truncated || !errors.Is(err, upstream.ErrStalled) {
		t.Fatalf("error = %v, want a truncated *model.Error wrapping upstream.ErrStalled", err)
	}
	if !strings.Contains(err.Error(), "sent nothing for 1m0s") {
		t.Errorf("error text %q does not say how long the server was silent", err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v: a stalled stream was tried again", srv.Requests(), sl.Got())
	}
}

// Pings are not events: a server that sends only pings after its last
// event (a stuck backend behind a live connection) is cut off as one that
// sends nothing.
func TestGeneratePingsDoNotCount(t *testing.T) {
	gate := make(chan struct{})
	pinged := make(chan struct{})
	srv := newServer(t, reply{Events: []string{messageStart(1), textStart(0), textDelta(0, "Let me"), ping(), ping()}, Hold: true,
		Gate: map[int]chan struct{}{2: gate, 3: pinged}})
	c := clock.NewFake(time.Unix(1000, 0))
	m, _ := newModel(t, srv, Options{StreamIdleTimeout: time.Minute, Clock: c})
	done := generateUntilText(t, m)
	c.Advance(40 * time.Second)
	close(gate) // a ping at 40 s
	close(pinged)
	time.Sleep(50 * time.Millisecond) // for the client to read it: counted, it would move the cut to 100 s
	c.Advance(20 * time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, upstream.ErrStalled) {
			t.Errorf("error = %v, want upstream.ErrStalled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream of pings alone was not cut off a minute after its last event")
	}
}

// A turn is whole at message_stop: a server (or a proxy) that holds the
// answer open after it, or resets it, takes nothing from the turn.
func TestGenerateEndsAtMessageStop(t *testing.T) {
	turn := []string{
		messageStart(5), toolStart(0, "toolu_01", "get_weather", "{}"), jsonDelta(0, `{"city":"Oslo"}`), blockStop(0),
		messageDelta("tool_use", 7), messageStop(),
	}
	for _, r := range []reply{{Events: turn, Hold: true}, {Events: turn, Abort: true}} {
		srv := newServer(t, r, reply{Events: textTurn("again")})
		m, _ := newModel(t, srv, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := m.Generate(ctx, request(), nil)
		cancel()
		if err != nil {
			t.Fatalf("held %v, reset %v: Generate: %v", r.Hold, r.Abort, err)
		}
		want := []model.ToolUse{{ID: "toolu_01", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}
		if !reflect.DeepEqual(resp.ToolUses, want) || srv.Requests() != 1 {
			t.Errorf("held %v, reset %v: tool uses %+v after %d requests, want the first turn's", r.Hold, r.Abort, resp.ToolUses, srv.Requests())
		}
	}
}

// A tool use whose input max_tokens cut off never runs, whether its input
// so far is {} (none came) or half an object, and whether or not the API
// closed its block (it closes the block it cut like any other); a whole
// call before it runs.
func TestGenerateMaxTokensInAToolUse(t *testing.T) {
	whole := model.ToolUse{ID: "toolu_00", Name: "get_weather", Arguments: `{"city":"Oslo"}`}
	for _, tt := range []struct {
		name   string
		events []string
		want   []model.ToolUse
	}{
		{"cut before its input, block open", []string{messageStart(5), textStart(0), textDelta(0, "Deleting."), blockStop(0), toolStart(1, "toolu_01", "delete_files", "{}"), messageDelta("max_tokens", 9), messageStop()}, nil},
		{"cut in its input, block open", []string{messageStart(5), toolStart(0, "toolu_01", "delete_files", "{}"), jsonDelta(0, `{"path": "/`), messageDelta("max_tokens", 9), messageStop()}, nil},
		{"cut before its input, block closed", []string{messageStart(5), toolStart(0, "toolu_01", "delete_files", "{}"), blockStop(0), messageDelta("max_tokens", 9), messageStop()}, nil},
		{"cut in its input, block closed", []string{messageStart(5), toolStart(0, "toolu_01", "delete_files", "{}"), jsonDelta(0, `{"path": "/`), blockStop(0), messageDelta("max_tokens", 9), messageStop()}, nil},
		{"a whole call, then one cut", []string{
			messageStart(5), toolStart(0, "toolu_00", "get_weather", "{}"), jsonDelta(0, `{"city":"Oslo"}`), blockStop(0),
			toolStart(1, "toolu_01", "delete_files", "{}"), blockStop(1), messageDelta("max_tokens", 9), messageStop(),
		}, []model.ToolUse{whole}},
		{"a refusal in its input, block closed", []string{messageStart(5), toolStart(0, "toolu_01", "delete_files", "{}"), jsonDelta(0, `{"path": "/`), blockStop(0), messageDelta("refusal", 9), messageStop()}, nil},
		{"a whole call, then text cut", []string{
			messageStart(5), toolStart(0, "toolu_00", "get_weather", "{}"), jsonDelta(0, `{"city":"Oslo"}`), blockStop(0),
			textStart(1), textDelta(1, "and then"), blockStop(1), messageDelta("max_tokens", 9), messageStop(),
		}, []model.ToolUse{whole}},
	} {
		srv := newServer(t, reply{Events: tt.events})
		m, _ := newModel(t, srv, Options{})
		resp, _, err := fakeapi.Generate(t, m, request())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(resp.ToolUses, tt.want) || (resp.StopReason != model.StopMaxTokens && resp.StopReason != model.StopRefusal) {
			t.Errorf("%s: tool uses %+v, stop %q; want %+v, max_tokens or refusal", tt.name, resp.ToolUses, resp.StopReason, tt.want)
		}
	}
}

// An API that quotes the key it refused does not pass it on: the error
// goes to pages, the worker, the log and the journal.
func TestGenerateErrorQuotesTheKey(t *testing.T) {
	srv := newServer(t, reply{Status: http.StatusUnauthorized, Body: errorBody("authentication_error", "invalid key "+testKey+" (and "+testKey[:17]+"…)")})
	m, _ := newModel(t, srv, Options{})
	_, _, err := fakeapi.Generate(t, m, request())
	if err == nil || strings.Contains(err.Error(), testKey[:16]) || !strings.Contains(err.Error(), "invalid key [key] (and [key]…)") {
		t.Errorf("error = %v, want the key said as [key]", err)
	}
}

// A streamed error that refuses the request is said as the API says it,
// not as a stream cut off, and is not tried again.
func TestGenerateRefusedMidStream(t *testing.T) {
	srv := newServer(t, reply{Events: []string{messageStart(1), errorEvent("invalid_request_error", "prompt is too long")}})
	m, sl := newModel(t, srv, Options{})
	_, _, err := fakeapi.Generate(t, m, request())
	const want = "anthropic: the chat is longer than the model can read: start a new chat (prompt is too long)"
	if err == nil || err.Error() != want || !errors.Is(err, model.ErrTooLong) || len(sl.Got()) != 0 {
		t.Errorf("error = %v after waits %v, want %q (ErrTooLong) at once", err, sl.Got(), want)
	}
}

// What an API says in an error is bounded before it is read whole, and cut
// to upstream.MaxMessage in the error, which pages, workers, logs and the
// journal carry.
func TestGenerateLongErrorMessage(t *testing.T) {
	long := strings.Repeat("x", 32<<10)
	for _, tt := range []struct {
		reply reply
		words bool // the API's own words are read (a body past MaxErrorBody is not JSON once cut)
	}{
		{reply{Status: http.StatusBadRequest, Body: errorBody("invalid_request_error", long)}, true},
		{reply{Events: []string{messageStart(1), errorEvent("invalid_request_error", long)}}, true},
		{reply{Status: http.StatusBadRequest, Body: errorBody("invalid_request_error", strings.Repeat("x", 8<<20))}, false},
	} {
		srv := newServer(t, tt.reply)
		m, _ := newModel(t, srv, Options{})
		_, _, err := fakeapi.Generate(t, m, request())
		var me *model.Error
		if !errors.As(err, &me) || len(me.Message) > upstream.MaxMessage+len("…") || tt.words != strings.HasPrefix(me.Message, "xxx") {
			t.Errorf("status %d: error %.80q… of %d bytes, want at most %d (the API's words: %v)", tt.reply.Status, err, len(err.Error()), upstream.MaxMessage, tt.words)
		}
	}
}

// An answer that is not an event stream (a proxy's login page) is said as
// such, once.
func TestGenerateNotAnEventStream(t *testing.T) {
	srv := newServer(t, reply{Events: []string{"<html>sign in</html>"}, ContentType: "text/html"})
	m, sl := newModel(t, srv, Options{})
	_, _, err := fakeapi.Generate(t, m, request())
	if !errors.Is(err, upstream.ErrNotEventStream) || !strings.Contains(err.Error(), "text/html") {
		t.Errorf("error = %v, want upstream.ErrNotEventStream naming text/html", err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v, want one request", srv.Requests(), sl.Got())
	}
}

// A server that takes the request and never answers is cut off by the
// same watch as one that stops sending, and not asked again: each try
// would cost the user the whole wait.
func TestGenerateSilentServer(t *testing.T) {
	srv := newServer(t, reply{Silent: true}, reply{Events: textTurn("late")})
	c := clock.NewFake(time.Unix(1000, 0))
	m, sl := newModel(t, srv, Options{StreamIdleTimeout: time.Minute, Clock: c})
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(context.Background(), request(), nil)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); srv.Requests() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no request came")
		}
	}
	c.Advance(time.Minute)
	err := <-done
	if !errors.Is(err, upstream.ErrStalled) || err.Error() != "anthropic: request failed: the server sent nothing for 1m0s" {
		t.Errorf("error = %v, want the watch's", err)
	}
	if srv.Requests() != 1 || len(sl.Got()) != 0 {
		t.Errorf("requests %d, waits %v: a silent server was asked again", srv.Requests(), sl.Got())
	}
}

// A connection that timed out (a client's own header timeout here; a
// dial, a TLS handshake, a DNS lookup) is a connection that failed:
// tried again.
func TestGenerateConnectionTimeoutRetried(t *testing.T) {
	srv := newServer(t, reply{Silent: true})
	client := srv.Client()
	client.Transport.(*http.Transport).ResponseHeaderTimeout = 20 * time.Millisecond
	m, sl := newModel(t, srv, Options{HTTPClient: client})
	_, _, err := fakeapi.Generate(t, m, request())
	if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") || len(sl.Got()) != DefaultMaxRetries {
		t.Errorf("error = %v after waits %v, want the timeout after %d retries", err, sl.Got(), DefaultMaxRetries)
	}
}
