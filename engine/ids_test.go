package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestSessionIDs: a session id is 1 to MaxIDBytes ASCII letters, digits,
// '-' and '_'. Loading any other is ErrNoSession without asking the store
// (a NATS subject cannot take it); opening one is refused.
func TestSessionIDs(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"dqnbghnbp5ze6jbbtlzq", true},
		{"aisdk_ABC-def_09", true},
		{strings.Repeat("x", engine.MaxIDBytes), true},
		{"", false},
		{strings.Repeat("x", engine.MaxIDBytes+1), false},
		{"a.b", false},
		{"*", false},
		{">", false},
		{"a b", false},
		{"$G", false},
		{"é", false},
	} {
		if err := engine.CheckID(tc.id); (err == nil) != tc.ok {
			t.Errorf("CheckID(%.40q): %v, want ok %v", tc.id, err, tc.ok)
		}
	}

	store := &countingLoads{Store: engine.NewMemoryStore()}
	h := setup(t, recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}}), callsThenSummary(), engine.Options{Store: store})
	store.loads = 0
	for _, id := range []string{"a.b", strings.Repeat("x", 4100)} {
		if _, err := h.e.Load(context.Background(), id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("Load(%.40q): %v, want ErrNoSession", id, err)
		}
		if _, err := h.e.Open(context.Background(), engine.OpenOptions{ID: id}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("Open with the id %.40q: %v, want ErrBadRequest", id, err)
		}
	}
	if store.loads != 0 {
		t.Errorf("the store was asked %d times for ids no session has", store.loads)
	}
}

// countingLoads counts the store's Loads.
type countingLoads struct {
	engine.Store
	loads int
}

func (c *countingLoads) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	c.loads++
	return c.Store.Load(ctx, session)
}
