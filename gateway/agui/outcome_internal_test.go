package agui

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway/frontend"
)

// TestRunOutcome: a run that a Stop ended (its model turn or its calls
// cancelled) finishes with the outcome cancelled; one whose calls a new
// message typed past, which the model then answered, with success, as
// does one whose Stop came before its input (an earlier run's), and one
// where a sub-agent's call was cancelled as the call it answers ended.
// Calls that wait on the front end are named, whatever came before.
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
	subCancelled := ev{engine.EventToolFinished, map[string]any{"id": "sub1", "name": "ask", "ok": false, "error": "ask was cancelled: the call to deleg it answers ended.", "code": "cancelled", "parent": "deleg"}}
	delegTimedOut := ev{engine.EventToolFinished, engine.ToolFinishedEvent{ID: "deleg", Name: "deleg", Error: "deleg timed out", Code: engine.CodeTimeout}}
	for _, tc := range []struct {
		name    string
		base    int64 // events up to it are before the run's input
		events  []ev
		pending []string // the run ends waiting on these (EndPending); nil: at its idle
		want    string   // RUN_FINISHED's outcome
	}{
		{"the model turn stopped", 0, []ev{user, stoppedTurn, idle}, nil, `{"type":"cancelled"}`},
		{"a waiting call stopped", 0, []ev{user, cancelledCall, idle}, nil, `{"type":"cancelled"}`},
		{"a message typed past the call", 0, []ev{cancelledCall, user, replied, idle}, nil, `{"type":"success"}`},
		// As the handler attaches it: the calls typed past settle before
		// the run's base, in the attach's step.
		{"a message typed past the call, before the run's base", 1, []ev{cancelledCall, user, replied, idle}, nil, `{"type":"success"}`},
		{"the reply after the Stop of an earlier run", 2, []ev{user, stoppedTurn, user, replied, idle}, nil, `{"type":"success"}`},
		{"a reply", 0, []ev{user, replied, idle}, nil, `{"type":"success"}`},
		{"a sub-agent's call cancelled as its delegated call timed out", 0, []ev{user, subCancelled, delegTimedOut, replied, idle}, nil, `{"type":"success"}`},
		{"a sub-agent's call cancelled while the front end's call waits", 0, []ev{user, subCancelled, delegTimedOut}, []string{"front"}, `{"pendingToolCallIds":["front"],"type":"success"}`},
		{"a Stop, then calls that wait on the front end", 0, []ev{user, stoppedTurn}, []string{"front"}, `{"pendingToolCallIds":["front"],"type":"success"}`},
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
			if tc.pending != nil {
				r.End(frontend.EndPending, tc.pending)
			}
			if want := `"outcome":` + tc.want; !strings.Contains(rec.Body.String(), want) {
				t.Errorf("the run's events end %.200q, want %s", rec.Body.String()[max(0, rec.Body.Len()-200):], want)
			}
		})
	}
}
