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
	for _, tc := range []struct {
		name  string
		rerun func(event func(typ string, v any))
		want  string
	}{
		{"a turn of text", func(event func(string, any)) {
			event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "whole"})
			event(engine.EventModelFinished, engine.ModelFinishedEvent{})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "whole"}})
		}, "start start-step text-start text-delta text-end reset-step text-start text-delta text-end finish-step finish"},
		// The turn run again calls a tool only: the turn after it is a
		// step of its own, not one with it.
		{"a turn of a tool call, then text", func(event func(string, any)) {
			event(engine.EventModelFinished, engine.ModelFinishedEvent{})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant"}})
			event(engine.EventToolStarted, engine.ToolStartedEvent{ID: "call_1", Name: "lookup", Handler: engine.HandlerWorker, Attempt: 1})
			event(engine.EventToolFinished, engine.ToolFinishedEvent{ID: "call_1", OK: true, Name: "lookup", Result: "found"})
			event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "after"})
			event(engine.EventModelFinished, engine.ModelFinishedEvent{})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "after"}})
		}, "start start-step text-start text-delta text-end reset-step tool-input-start tool-input-available tool-output-available finish-step start-step text-start text-delta text-end finish-step finish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resetStepChunks(t, tc.rerun); got != tc.want {
				t.Errorf("chunks:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// resetStepChunks streams a user message, a cut turn's delta, its
// model.discarded, then rerun's events and session.idle, and returns the
// chunks' types.
func resetStepChunks(t *testing.T, rerun func(event func(typ string, v any))) string {
	t.Helper()
	var types []string
	for _, c := range streamChunks(t, func(event func(string, any)) {
		event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}})
		event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "cut "})
		event(engine.EventModelDiscarded, engine.ModelDiscardedEvent{Reason: "restarted"})
		rerun(event)
		event(engine.EventSessionIdle, struct{}{})
	}) {
		types = append(types, c["type"].(string))
	}
	return strings.Join(types, " ")
}

// TestFinishReason: the finish of a session gone idle names why its last
// model turn stopped, in the AI SDK's words.
func TestFinishReason(t *testing.T) {
	for stop, want := range map[string]string{
		model.StopEndTurn: "stop", model.StopRefusal: "stop", model.StopMaxTokens: "length", model.StopContentFilter: "content-filter",
	} {
		chunks := streamChunks(t, func(event func(string, any)) {
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}})
			event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: stop})
			event(engine.EventSessionIdle, struct{}{})
		})
		if last := chunks[len(chunks)-1]; last["type"] != "finish" || last["finishReason"] != want {
			t.Errorf("stop reason %s: the last chunk %v, want finish, %s", stop, last, want)
		}
	}
}

// TestModelRetryingSendsNothing: the AI SDK has no part for a model's
// retry: the stream stays as it was, and the text that follows streams as
// in a turn with no retry (integrations.md).
func TestModelRetryingSendsNothing(t *testing.T) {
	var types []string
	for _, c := range streamChunks(t, func(event func(string, any)) {
		event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}})
		event(engine.EventModelRetrying, engine.ModelRetryingEvent{Attempt: 1, Attempts: 4, Error: "anthropic: status 529: Overloaded", Backoff: "1.5s"})
		event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "fine"})
		event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
		event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "fine"}})
		event(engine.EventSessionIdle, struct{}{})
	}) {
		types = append(types, c["type"].(string))
	}
	if got, want := strings.Join(types, " "), "start start-step text-start text-delta text-end finish-step finish"; got != want {
		t.Errorf("chunks:\n got %s\nwant %s", got, want)
	}
}

// streamChunks streams the events play gives to a new response of a
// session, made ready by setup, and returns its chunks.
func streamChunks(t *testing.T, play func(event func(typ string, v any)), setup ...func(*stream)) []map[string]any {
	t.Helper()
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
	for _, f := range setup {
		f(st)
	}
	seq := int64(0)
	event := func(typ string, v any) {
		frame, _ := json.Marshal(v)
		ev := engine.Event{Type: typ, Frame: frame}
		if typ != engine.FrameMessageTaken { // a delivery: no seq
			seq++
			ev.Seq = seq
		}
		st.Event(context.Background(), nil, ev)
	}
	play(event)

	var chunks []map[string]any
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c map[string]any
		_ = json.Unmarshal([]byte(data), &c)
		chunks = append(chunks, c)
	}
	return chunks
}

// takesAll is a page that takes every message: the response's Sending
// waits for the message.taken the test plays.
type takesAll struct{}

func (takesAll) SendOnce(context.Context, string, string) error { return nil }

// TestResponseWaitsForItsMessage: a new message's response ends once the
// session goes idle after that message, not at the end of a turn that ran
// as it was sent (another tab's), which can go idle between the response's
// Attach and its message's arrival.
func TestResponseWaitsForItsMessage(t *testing.T) {
	var types []string
	for _, c := range streamChunks(t, func(event func(string, any)) {
		event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
		event(engine.EventSessionIdle, struct{}{})
		event(engine.FrameMessageTaken, engine.MessageTakenFrame{ID: "user-2"})
		event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", ID: "user-2", Content: "hello"}})
		event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "No rule for: hello"})
		event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
		event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "No rule for: hello"}})
		event(engine.EventSessionIdle, struct{}{})
	}, func(st *stream) {
		if err := st.sending.Send(context.Background(), takesAll{}, "user-2", "hello"); err != nil {
			t.Fatal(err)
		}
	}) {
		types = append(types, c["type"].(string))
	}
	if got, want := strings.Join(types, " "), "start start-step text-start text-delta text-end finish-step finish"; got != want {
		t.Errorf("chunks:\n got %s\nwant %s", got, want)
	}
}
