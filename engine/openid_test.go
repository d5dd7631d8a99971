package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/clienttools/gateway/engine"
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
