package agui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestModelRetryingSendsNothing: AG-UI has no event for a model's retry:
// the run stays as it was, and the text that follows streams as in a turn
// with no retry (integrations.md).
func TestModelRetryingSendsNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	r := newRun(rec, Options{}, runInput{ThreadID: "t1", RunID: "r1"})
	r.begin()
	seq := int64(0)
	event := func(typ string, v any) {
		seq++
		frame, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		r.Event(context.Background(), nil, engine.Event{Seq: seq, Type: typ, Frame: frame})
	}
	event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}})
	event(engine.EventModelRetrying, engine.ModelRetryingEvent{Attempt: 1, Attempts: 4, Error: "anthropic: status 529: Overloaded", Backoff: "1.5s"})
	event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "fine"})
	event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
	event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "fine"}})
	event(engine.EventSessionIdle, struct{}{})

	var types []string
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("an event that is not JSON: %s", data)
		}
		types = append(types, ev.Type)
	}
	if got, want := strings.Join(types, " "), "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}
