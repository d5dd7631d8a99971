package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestOpenWithID: an adapter that keys sessions by an id of its own (the
// AI SDK's chat id) opens the session under an id it derives, finds it
// again by Load, and cannot open a second one under the same id.
func TestOpenWithID(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{
		{Name: "get_local_time", Handler: engine.HandlerClient},
		{Name: "get_weather"},
	}}}
	h := setup(t, w, &fakeModel{}, engine.Options{})
	ctx := context.Background()

	s, err := h.e.Open(ctx, engine.OpenOptions{Owner: "browser-1", ID: "aisdk_chat1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != "aisdk_chat1" || s.Owner() != "browser-1" {
		t.Errorf("session %q of %q, want aisdk_chat1 of browser-1", s.ID(), s.Owner())
	}
	if got, err := h.e.Load(ctx, "aisdk_chat1"); err != nil || got != s {
		t.Errorf("Load = %v, %v: want the session", got, err)
	}
	if _, err := h.e.Open(ctx, engine.OpenOptions{Owner: "browser-2", ID: "aisdk_chat1"}); !errors.Is(err, engine.ErrSessionExists) {
		t.Errorf("a second Open with the id: %v, want ErrSessionExists", err)
	}

}

// TestOpenGivesTheSessionOutOnceStarted: a session being opened is not
// given to anyone else (a second request for the same chat, whose id the
// front ends derive) before it holds its lease and session.start has run:
// its steps ran before session.start, and a failed open left it running
// in another's hands, uncounted.
func TestOpenGivesTheSessionOutOnceStarted(t *testing.T) {
	w, starting, release := holdingStart()
	h := setup(t, w, textModel(), engine.Options{})
	ctx := context.Background()
	opened := make(chan *engine.Session, 1)
	go func() {
		s, err := h.e.Open(ctx, engine.OpenOptions{Owner: "browser-1", ID: "chat_new"})
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	recv(t, starting, "session.start")
	if _, ok := h.e.Session("chat_new"); ok {
		t.Error("Session gave the session out while session.start runs")
	}
	loaded := make(chan *engine.Session, 1)
	go func() {
		s, err := h.e.Load(ctx, "chat_new")
		if err != nil {
			t.Error(err)
		}
		loaded <- s
	}()
	var early *engine.Session
	select {
	case early = <-loaded:
		t.Error("Load gave the session out while session.start runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	s := recv(t, opened, "Open")
	if early == nil {
		early = recv(t, loaded, "Load")
	}
	if early != s {
		t.Error("Load gave out another session than the one opened")
	}
}

// TestFailedStartIsLogged: a session whose session.start fails is logged
// with the whole error: the page reads its public text alone, and the log
// said only "failed to start".
func TestFailedStartIsLogged(t *testing.T) {
	var log bytes.Buffer
	w := &testWorker{decide: func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		return engine.Decision{}, fmt.Errorf("%w: session.start at http://10.0.0.7/decide: the worker answered 500: host db-7 is down", engine.ErrWorker)
	}}
	e, err := engine.New(engine.Options{Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Clock: clock.NewFake(epoch), Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(context.Background(), engine.OpenOptions{}); !errors.Is(err, engine.ErrWorker) {
		t.Errorf("Open: %v, want the worker's failure", err)
	}
	stop(t, e) // its goroutines write no more
	if got := log.String(); !strings.Contains(got, "session failed to start") || !strings.Contains(got, "host db-7 is down") {
		t.Errorf("the log:\n%s\nwant a line saying the session failed to start, and why", got)
	}
}

// TestOpeningChatCountsOnce: a second request for a chat being opened, from
// a browser at its limit of sessions in memory, waits for it: it was
// refused for the browser's limit, counting the very chat it asked for.
func TestOpeningChatCountsOnce(t *testing.T) {
	w, starting, release := holdingStart()
	h := setup(t, w, textModel(), engine.Options{MaxLiveSessions: 1})
	ctx := context.Background()
	opened := make(chan error, 1)
	go func() {
		_, err := h.e.Open(ctx, engine.OpenOptions{Owner: "browser-1", ID: "chat_new"})
		opened <- err
	}()
	recv(t, starting, "session.start")
	loaded := make(chan error, 1)
	go func() {
		_, err := h.e.LoadOwn(ctx, "chat_new", "browser-1")
		loaded <- err
	}()
	// LoadOwn past its room check, waiting for the open (before, it was
	// refused at once and never got there).
	waitUntil(t, "LoadOwn waiting for the open", func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("engine.(*Engine).Load("))
	})
	close(release)
	if err := recv(t, opened, "Open"); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, loaded, "LoadOwn"); err != nil {
		t.Errorf("LoadOwn of the chat being opened: %v, want it once opened", err)
	}
}

// holdingStart is a worker whose session.start of the session chat_new
// says it began (starting) and waits for release.
func holdingStart() (w *testWorker, starting, release chan struct{}) {
	starting, release = make(chan struct{}), make(chan struct{})
	w = &testWorker{decide: func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if s, ok := req.Trigger.(engine.SessionStart); ok {
			if s.Session == "chat_new" {
				close(starting)
				<-release
			}
			return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model"}}, nil
		}
		return req.Proposed, nil
	}}
	return w, starting, release
}
