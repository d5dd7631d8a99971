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
// so far is {} (none came) or half an object.
func TestGenerateMaxTokensInAToolUse(t *testing.T) {
	for _, events := range [][]string{
		{messageStart(5), textStart(0), textDelta(0, "Deleting."), blockStop(0), toolStart(1, "toolu_01", "delete_files", "{}"), messageDelta("max_tokens", 9), messageStop()},
		{messageStart(5), toolStart(0, "toolu_01", "delete_files", "{}"), jsonDelta(0, `{"path": "/`), messageDelta("max_tokens", 9), messageStop()},
	} {
		srv := newServer(t, reply{Events: events})
		m, _ := newModel(t, srv, Options{})
		resp, _, err := fakeapi.Generate(t, m, request())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolUses) != 0 || resp.StopReason != model.StopMaxTokens {
			t.Errorf("tool uses %+v, stop %q; want none, max_tokens", resp.ToolUses, resp.StopReason)
		}
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

// A server that accepts the request and never answers is not asked again:
// each try would cost the user the whole header timeout.
func TestGenerateHeaderTimeoutNotRetried(t *testing.T) {
	srv := newServer(t, reply{Events: textTurn("late")})
	client := srv.Client()
	client.Transport.(*http.Transport).ResponseHeaderTimeout = time.Nanosecond
	m, sl := newModel(t, srv, Options{HTTPClient: client})
	_, _, err := fakeapi.Generate(t, m, request())
	if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Fatalf("error = %v, want the header timeout", err)
	}
	if len(sl.Got()) != 0 {
		t.Errorf("waits %v: a header timeout was tried again", sl.Got())
	}
}
