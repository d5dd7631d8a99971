package aisdk

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway/sse"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestResetStepKeepsTheStep: a model turn cut by a restart and run again
// (model.discarded) goes on in the step the client emptied: reset-step
// drops the step's parts but keeps the step, so a new step left an empty
// one behind in the client's message.
func TestResetStepKeepsTheStep(t *testing.T) {
	eng, err := engine.New(engine.Options{
		Worker: &engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return nil, nil }),
		Store:  engine.NewMemoryStore(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
	}()
	sess, err := eng.Open(context.Background(), engine.OpenOptions{Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	st := newStream(rec, Options{}, sess)
	st.sse = sse.New(rec, nil, time.Second)
	st.fresh = true
	seq := int64(0)
	event := func(typ string, v any) {
		seq++
		frame, _ := json.Marshal(v)
		st.Event(context.Background(), nil, engine.Event{Seq: seq, Type: typ, Frame: frame})
	}
	event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}})
	event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "cut "})
	event(engine.EventModelDiscarded, engine.ModelDiscardedEvent{Reason: "restarted"})
	event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "whole"})
	event(engine.EventModelFinished, engine.ModelFinishedEvent{})
	event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "whole"}})
	event(engine.EventSessionIdle, struct{}{})

	var types []string
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct{ Type string }
		_ = json.Unmarshal([]byte(data), &c)
		types = append(types, c.Type)
	}
	want := "start start-step text-start text-delta text-end reset-step text-start text-delta text-end finish-step finish"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("chunks:\n got %s\nwant %s", got, want)
	}
}
