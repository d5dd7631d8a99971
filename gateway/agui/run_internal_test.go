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

// TestRunSendsWhatTheFrontEndLacks: a run that starts with a text message
// the front end has sends only what it lacks of it, on the same message:
// nothing when it has it whole, the rest when a reload or a lost
// connection cut it, even inside a delta; nothing more when its text is
// not the session's.
func TestRunSendsWhatTheFrontEndLacks(t *testing.T) {
	deltas := []string{"One ", "two ", "three."}
	for _, tc := range []struct {
		name, have, want string
	}{
		{"whole", "One two three.", ""},
		{"cut after a delta", "One ", "two three."},
		{"cut inside a delta", "One tw", "o three."},
		{"nothing of it", "", "One two three."},
		{"other text", "Uno dos", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := newRun(rec, Options{}, runInput{ThreadID: "t1", RunID: "r1"})
			r.begin()
			r.have, r.haveSeq, r.lastText = tc.have, 5, msgID(5)
			for i, d := range deltas {
				frame, _ := json.Marshal(engine.ModelDeltaEvent{Text: d})
				r.Event(context.Background(), nil, engine.Event{Seq: int64(5 + i), Type: engine.EventModelDelta, Frame: frame})
			}
			r.Event(context.Background(), nil, engine.Event{Seq: 8, Type: engine.EventModelFinished, Frame: json.RawMessage(`{}`)})
			var got strings.Builder
			for _, line := range strings.Split(rec.Body.String(), "\n") {
				var ev map[string]any
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) != nil {
					continue
				}
				if id, ok := ev["messageId"]; ok && id != "gw5" {
					t.Errorf("%v went on message %v, want gw5", ev["type"], id)
				}
				if ev["type"] == "TEXT_MESSAGE_CONTENT" {
					got.WriteString(ev["delta"].(string))
				}
			}
			if got.String() != tc.want {
				t.Errorf("sent %q, want %q", got.String(), tc.want)
			}
		})
	}
}

// takesAll is a page that takes every message, and keeps the id it was
// sent with: the run's Sending waits for the message.taken the test plays.
type takesAll struct{ id string }

func (p *takesAll) SendOnce(_ context.Context, id, _ string) error {
	p.id = id
	return nil
}

// TestRunWaitsForItsMessage: a run that answers a front-end tool and sends
// a new message (one request with both) ends once the session goes idle
// after that message: the turn the answer began may end, and the session
// go idle, between the run's Attach and its message's arrival, and that
// idle is not the message's answer. Nor is an earlier user message the
// replay holds. A message whose id the engine would not take is sent with
// one of the gateway's, which its message.taken names.
func TestRunWaitsForItsMessage(t *testing.T) {
	for _, tc := range []struct{ name, id string }{
		{"with an id", "user-2"},
		{"with none the engine keeps", ""},
		{"with one too long", strings.Repeat("x", engine.MaxMessageIDBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := newRun(rec, Options{}, runInput{ThreadID: "t1", RunID: "r1"})
			r.begin()
			r.base, r.input = 4, true
			page := &takesAll{}
			if err := r.sending.Send(context.Background(), page, tc.id, "hello"); err != nil {
				t.Fatal(err)
			}
			if tc.id != "" && len(tc.id) <= engine.MaxMessageIDBytes && page.id != tc.id {
				t.Fatalf("sent with id %q, want the front end's %q", page.id, tc.id)
			}
			if engine.CheckMessageID(page.id) != nil {
				t.Fatalf("sent with id %q, which the engine does not take", page.id)
			}
			seq := r.base
			event := func(typ string, v any) {
				frame, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				ev := engine.Event{Type: typ, Frame: frame}
				if typ != engine.FrameMessageTaken { // a delivery: no seq
					seq++
					ev.Seq = seq
				}
				r.Event(context.Background(), nil, ev)
			}
			// An earlier message, replayed; the answer's turn, ending as
			// the message is on its way.
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", Content: "what time is it"}})
			event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "get_local_time returned"})
			event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "get_local_time returned"}})
			event(engine.EventSessionIdle, struct{}{})
			if r.Ended() {
				t.Fatal("the run ended at the idle before its message was taken")
			}
			event(engine.FrameMessageTaken, engine.MessageTakenFrame{ID: page.id})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "user", ID: page.id, Content: "hello"}})
			if r.Ended() {
				t.Fatal("the run ended before its message's answer")
			}
			event(engine.EventModelDelta, engine.ModelDeltaEvent{Text: "No rule for: hello"})
			event(engine.EventModelFinished, engine.ModelFinishedEvent{StopReason: model.StopEndTurn})
			event(engine.EventMessage, engine.MessageEvent{Message: engine.Message{Role: "assistant", Content: "No rule for: hello"}})
			event(engine.EventSessionIdle, struct{}{})
			if !r.Ended() {
				t.Fatal("the run did not end at the idle after its message's answer")
			}
			if body := rec.Body.String(); !strings.Contains(body, `"delta":"No rule for: hello"`) {
				t.Errorf("the message's answer is not in the run:\n%s", body)
			}
		})
	}
}
