package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

func TestSmokeLoop(t *testing.T) {
	m := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			onDelta("got: ")
			onDelta(last.Content)
			return model.Response{Text: "got: " + last.Content, StopReason: model.StopEndTurn}, nil
		}
		return model.Response{ToolUses: []model.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Tokyo"}`}}, StopReason: model.StopToolUse}, nil
	})
	w := &engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake"}, Tools: []engine.Tool{{
		Name: "get_weather", Input: engine.Schema(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Exec: func(ctx context.Context, args json.RawMessage) (any, error) { return "clear in Tokyo", nil },
	}}}
	e, err := engine.New(engine.Options{Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, sub, _ := s.Subscribe(0, 0)
	if err := s.Send(ctx, "weather?"); err != nil {
		t.Fatal(err)
	}
	var types []string
	timeout := time.After(5 * time.Second)
	idles := 0
loop:
	for {
		select {
		case ev := <-sub.C():
			types = append(types, ev.Type)
			t.Logf("%s", ev.Frame)
			if ev.Type == engine.EventSessionIdle {
				idles++
				break loop
			}
		case <-timeout:
			t.Fatalf("no idle; got %v", types)
		}
	}
	tr, _ := s.Transcript(ctx)
	if len(tr) != 4 || !strings.Contains(tr[3].Content, "clear in Tokyo") {
		t.Fatalf("transcript %+v", tr)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
