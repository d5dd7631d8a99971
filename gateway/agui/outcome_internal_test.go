package agui

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestRunOutcome: a run that a Stop ended (its model turn or its calls
// cancelled) finishes with the outcome cancelled; one whose calls a new
// message typed past, which the model then answered, with success, as
// does one whose Stop came before its input (an earlier run's).
func TestRunOutcome(t *testing.T) {
	type ev struct {
		typ string
		v   any
	}
	user := ev{engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "hi"}}}
	cancelledCall := ev{engine.EventToolFinished, engine.ToolFinishedEvent{ID: "c1", Name: "pick", Error: "pick was cancelled: cancelled by the user.", Code: engine.CodeCancelled}}
	stoppedTurn := ev{engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopCancelled}}
	replied := ev{engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn}}
	idle := ev{engine.EventSessionIdle, struct{}{}}
	for _, tc := range []struct {
		name   string
		base   int64 // events up to it are before the run's input
		events []ev
		want   string
	}{
		{"the model turn stopped", 0, []ev{user, stoppedTurn, idle}, "cancelled"},
		{"a waiting call stopped", 0, []ev{user, cancelledCall, idle}, "cancelled"},
		{"a message typed past the call", 0, []ev{cancelledCall, user, replied, idle}, "success"},
		{"the reply after the Stop of an earlier run", 2, []ev{user, stoppedTurn, user, replied, idle}, "success"},
		{"a reply", 0, []ev{user, replied, idle}, "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := newRun(rec, Options{}, runInput{ThreadID: "t1", RunID: "r1"})
			r.base, r.input = tc.base, true
			r.begin()
			for i, e := range tc.events {
				frame, err := json.Marshal(e.v)
				if err != nil {
					t.Fatal(err)
				}
				r.Event(context.Background(), nil, engine.Event{Seq: int64(i + 1), Type: e.typ, Frame: frame})
			}
			if want := `"outcome":{"type":"` + tc.want + `"}`; !strings.Contains(rec.Body.String(), want) {
				t.Errorf("the run's events end %.200q, want %s", rec.Body.String()[max(0, rec.Body.Len()-200):], want)
			}
		})
	}
}
