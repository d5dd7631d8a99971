package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway/frontend"
	"github.com/clienttools/gateway/gateway/sse"
)

// run turns one page's frames into the events of one AG-UI run, owned by
// the request's goroutine. It ends with RUN_FINISHED when the session is
// idle after the run's input, or when every open call is a front-end call
// this run delivered (outcome.pendingToolCallIds names them); with
// RUN_ERROR when the session reports an error.
type run struct {
	w      http.ResponseWriter
	opts   Options
	sse    *sse.Writer
	thread string
	runID  string

	base  int64 // the session's last seq before the run's input
	input bool  // the run gave the session something to do
	ended bool
	// stopped: the turn's last word, after the run's input, was a Stop or
	// the session's end (the session's model turn or one of its own calls
	// cancelled; a sub-agent's call is cancelled when the call it answers
	// ends): RUN_FINISHED's outcome is cancelled, unless calls wait on the
	// front end. A user message after it, or a model turn that went on,
	// clears it.
	stopped bool

	text     string // the open text message's id; "": none
	lastText string // the model turn's message id, the parent of its calls
	// haveSeq begins the text message the replay starts with, which the
	// front end has (its id msgID(haveSeq); 0: none): have is what it has
	// of it that the replay has not passed yet. Its deltas are not sent
	// again; those past have are (a reply a reload or a lost connection
	// cut), on the same message id.
	haveSeq int64
	have    string
	other   bool // the front end's text of it is not the session's: the rest is not sent

	sending  frontend.Sending   // the run's new message, until the session takes it
	shown    map[string]bool    // calls whose TOOL_CALL_START is written
	track    frontend.Calls     // open calls, delivered ones: when the run waits
	known    map[string]bool    // calls the input's messages already show
	answered map[string]bool    // calls this run's input answered
	sent     map[string]message // the input's tool messages, by call: the front end's own answers
}

func newRun(w http.ResponseWriter, o Options, in runInput) *run {
	return &run{w: w, opts: o, thread: in.ThreadID, runID: in.RunID,
		shown: map[string]bool{}, known: map[string]bool{}, answered: map[string]bool{}, sent: map[string]message{}}
}

func (r *run) emit(v map[string]any) { _ = r.sse.JSON(v) }

// showCall writes a call's TOOL_CALL_START, ARGS and END once, unless the
// input's messages show it.
func (r *run) showCall(seq int64, id, name, args string) {
	if r.shown[id] || r.known[id] {
		return
	}
	r.shown[id] = true
	parent := r.lastText
	if parent == "" && seq > 0 {
		parent = msgID(seq)
		r.lastText = parent
	}
	r.closeText()
	start := map[string]any{"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name}
	if parent != "" {
		// None for a call shown from its delivery, which has no seq.
		start["parentMessageId"] = parent
	}
	r.emit(start)
	if args != "" {
		r.emit(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": args})
	}
	r.emit(map[string]any{"type": "TOOL_CALL_END", "toolCallId": id})
}

// run streams until the run ends or ctx does.
func (r *run) run(ctx context.Context, page *engine.Page) {
	r.begin()
	frontend.Pump{SSE: r.sse, KeepAlive: r.opts.KeepAlive, Calls: &r.track, Input: r.input}.Run(ctx, page, nil, r)
}

// begin starts the response: its event stream, RUN_STARTED first.
func (r *run) begin() {
	r.sse = sse.New(r.w, nil, r.opts.WriteTimeout)
	r.emit(map[string]any{"type": "RUN_STARTED", "threadId": r.thread, "runId": r.runID})
}

// The codes of RUN_ERROR besides a session error event's own (engine's
// SessionErrors), as docs/integrations.md lists them.
const (
	// CodeSlow: the run fell behind the session (its buffer overflowed).
	CodeSlow = "slow_subscriber"
	// CodeStopping: the gateway stops (a restart, a deploy); the run was cut.
	CodeStopping = "gateway_stopping"
	// GuardPrefix starts a guard's code: "guard." and guard.tripped's guard.
	GuardPrefix = "guard."
)

// Ended reports whether RUN_FINISHED or RUN_ERROR is written.
func (r *run) Ended() bool { return r.ended }

// End ends the run: RUN_FINISHED (naming the pending calls), or RUN_ERROR
// when the page fell behind or the gateway stops.
func (r *run) End(why frontend.End, pending []string) {
	switch why {
	case frontend.EndSlow:
		r.fail("the run fell behind the session: run again", CodeSlow)
		return
	case frontend.EndStopping:
		r.fail("the gateway is stopping (a restart or a deploy): this run was cut; run again once the gateway is back", CodeStopping)
		return
	}
	r.finish(pending)
}

func (r *run) closeText() {
	if r.text != "" {
		r.emit(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": r.text})
		r.text = ""
	}
}

func (r *run) finish(pending []string) {
	r.closeText()
	// Calls that wait on the front end come first: the client reads them
	// on a success alone, and the turn goes on once they are answered.
	outcome := map[string]any{"type": "success"}
	if len(pending) > 0 {
		outcome["pendingToolCallIds"] = pending
	} else if r.stopped {
		outcome["type"] = "cancelled"
	}
	r.emit(map[string]any{"type": "RUN_FINISHED", "threadId": r.thread, "runId": r.runID, "outcome": outcome})
	r.ended = true
}

func (r *run) fail(message, code string) {
	r.closeText()
	ev := map[string]any{"type": "RUN_ERROR", "message": message}
	if code != "" {
		ev["code"] = code
	}
	r.emit(ev)
	r.ended = true
}

func msgID(seq int64) string { return idPrefix + strconv.FormatInt(seq, 10) }

// Event handles one frame of the page's stream.
func (r *run) Event(ctx context.Context, page *engine.Page, ev engine.Event) {
	r.sending.See(ev)
	if !r.track.See(ev) {
		return // a sub-agent's text or worker call: not the assistant's
	}
	if r.haveSeq != 0 && ev.Seq == r.haveSeq && ev.Type != engine.EventModelDelta {
		// The front end's message of that id is no streamed text: a
		// turn's calls (their parent), or text that came whole.
		r.haveSeq, r.have = 0, ""
	}
	switch ev.Type {
	case engine.EventModelDelta:
		var e engine.ModelDeltaEvent
		if json.Unmarshal(ev.Frame, &e) != nil || e.Text == "" {
			return
		}
		if r.haveSeq != 0 && r.text == "" {
			e.Text = r.had(e.Text)
			if e.Text == "" {
				return
			}
			// Past what the front end has: the rest, on its message.
			r.text = msgID(r.haveSeq)
			r.lastText = r.text
			r.emit(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": r.text, "role": "assistant"})
		}
		if r.text == "" {
			r.text = msgID(ev.Seq)
			r.lastText = r.text
			r.emit(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": r.text, "role": "assistant"})
		}
		r.emit(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": r.text, "delta": e.Text})
	case engine.EventModelFinished, engine.EventModelDiscarded:
		r.haveSeq, r.have, r.other = 0, "", false
		r.closeText()
		if ev.Seq > r.base {
			var e engine.ModelFinishedEvent
			r.stopped = json.Unmarshal(ev.Frame, &e) == nil && e.StopReason == model.StopCancelled
		}
	case engine.EventMessage:
		var e engine.MessageEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		switch e.Message.Role {
		case "assistant":
			if r.lastText == "" && e.Message.Content != "" {
				// The model did not stream: its text comes whole.
				id := msgID(ev.Seq)
				r.emit(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
				r.emit(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": e.Message.Content})
				r.emit(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": id})
				r.lastText = id
			}
		case "user", "tool":
			r.lastText = ""
		}
		if e.Message.Role == "user" {
			r.stopped = false
		}
	case engine.EventToolStarted:
		var e engine.ToolStartedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		r.track.Started(e.ID)
		r.showCall(ev.Seq, e.ID, e.Name, e.Arguments)
	case engine.EventToolApproval:
		// It waits for the user (approval is not asked through this
		// front end): shown now, its result comes once it settles.
		var e engine.ToolApprovalEvent
		if json.Unmarshal(ev.Frame, &e) == nil {
			r.showCall(ev.Seq, e.ID, e.Name, e.Arguments)
		}
	case engine.FrameToolCall:
		var e engine.ClientCall
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		if r.track.Delivered(ctx, page, e) { // bad input is answered: tool.finished follows
			// One the front end was never shown (it started before this
			// run, in another tab's): shown, so it can run it.
			r.showCall(ev.Seq, e.ID, e.Name, e.Arguments)
		}
	case engine.EventToolFinished:
		var e engine.ToolFinishedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		r.track.Finished(e.ID)
		if ev.Seq > r.base && e.Code == engine.CodeCancelled {
			var sub struct {
				Parent string `json:"parent"`
			}
			r.stopped = json.Unmarshal(ev.Frame, &sub) == nil && sub.Parent == ""
		}
		if r.answered[e.ID] && (e.OK || e.Code == engine.CodeToolFailed) || r.sent[e.ID].says(e) {
			// The front end's own tool message holds the outcome: this
			// run's answer settled the call as it says, or an earlier
			// run's (this run is its duplicate). An answer the call took
			// but that settled it otherwise (its result fails the output
			// schema) is shown.
			return
		}
		result := map[string]any{"type": "TOOL_CALL_RESULT", "messageId": msgID(ev.Seq) + "r", "toolCallId": e.ID, "content": e.Result, "role": "tool"}
		if !e.OK {
			// TOOL_CALL_RESULT has no error field: the tool message the
			// client mints from it keeps the event's metadata.
			result["content"] = e.Error
			result["metadata"] = map[string]any{"gateway": map[string]any{"error": true, "code": e.Code}}
		}
		r.closeText()
		r.emit(result)
	case engine.EventClientEvent:
		var e engine.ClientEventEvent
		if ev.Seq <= r.base {
			return // before the run's input: an earlier run's, or nobody's now
		}
		if json.Unmarshal(ev.Frame, &e) == nil && e.Name != "" {
			r.emit(map[string]any{"type": "CUSTOM", "name": e.Name, "value": e.Data})
		}
	case engine.EventError, engine.EventGuardTripped:
		if ev.Seq <= r.base {
			// Before the run's input, in the replay from the app's last
			// gw<seq>: an earlier run's end, which must not end this one
			// (a new message's answer would never come, nor its gw<seq>,
			// and every later run would replay it again).
			return
		}
		var e struct {
			Code    string `json:"code"`
			Guard   string `json:"guard"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Frame, &e)
		code := e.Code
		if code == "" && e.Guard != "" {
			code = GuardPrefix + e.Guard
		}
		r.fail(e.Message, code)
	case engine.EventSessionIdle:
		if !r.sending.Waiting() && (ev.Seq > r.base || !r.input) {
			r.finish(nil)
		}
	case engine.EventSessionEnded:
		r.finish(nil)
	}
}

// had takes a delta of the message the front end has: the part past what
// it has, "" when it has all of the delta. A delta that is not what it has
// (the app changed the text) leaves the rest of the message unsent.
func (r *run) had(delta string) string {
	if r.other {
		return ""
	}
	if rest, ok := strings.CutPrefix(r.have, delta); ok {
		r.have = rest
		return ""
	}
	if tail, ok := strings.CutPrefix(delta, r.have); ok {
		r.have = ""
		return tail
	}
	r.other = true
	return ""
}

// says reports whether the tool message m (zero: none) is the outcome e:
// the same error, or the same result as the session reads it.
func (m message) says(e engine.ToolFinishedEvent) bool {
	switch {
	case m.ToolCallID == "":
		return false
	case !e.OK:
		return m.Error != "" && m.Error == e.Error
	}
	if m.Error != "" {
		return false
	}
	content := strings.TrimSpace(m.text())
	if e.Result == content {
		return true // a text result, or JSON as the front end wrote it
	}
	var text string
	if json.Unmarshal([]byte(content), &text) == nil {
		return e.Result == text // a JSON string: the model reads the string
	}
	var compact bytes.Buffer
	return json.Compact(&compact, []byte(content)) == nil && e.Result == compact.String()
}
