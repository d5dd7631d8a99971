package aisdk

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway/frontend"
	"github.com/clienttools/gateway/gateway/sse"
)

// stream turns one page's frames into the UI message stream of one
// response, owned by the request's goroutine.
//
// Steps: each model turn is a step (start-step ... finish-step), its text
// and its tool calls in it; a step stays open while its calls run, so a
// worker's output lands in the step that called it. The response ends
// with finish when the session is idle, or when every open call is a
// client call this stream delivered (the tool is pending: the app runs it
// in onToolCall, and its addToolOutput posts the answer).
type stream struct {
	w       http.ResponseWriter
	opts    Options
	sse     *sse.Writer
	session *engine.Session

	fresh   bool // a new response: start carries the user message's id
	input   bool // the request gave the session something to do
	started bool // the start chunk is written
	// held: what a new response got before its user message, written once
	// start carries the message's id: data parts (a worker's client.event
	// on the message's trigger), and the outcomes of earlier responses'
	// calls its message stopped (Interrupts).
	held []func()
	// stopped: the last event before a new response's message: the end
	// of a turn its page stopped (Interrupts) is not the response's end.
	stopped int64
	sending frontend.Sending // the response's new message, until the session takes it
	ended   bool
	seq     int64 // the last session event seen: the metadata's seq

	stop     string // the last model turn's stop reason: the finish's reason
	step     bool   // a step is open
	reset    bool   // the open step was reset (reset-step): the turn run again goes on in it
	text     string // the open text part's id; "": none
	turnText bool   // the model turn streamed text (deltas)
	textN    int

	calls  map[string]*callState
	track  frontend.Calls  // open calls, delivered ones: when the response waits
	known  map[string]bool // calls the client's message already shows
	client map[string]bool // of those, the ones the app runs
	page   string
}

// callState is what the stream knows of one call.
type callState struct {
	name    string
	client  bool
	shown   bool // tool-input-start is written
	input   bool // tool-input-available (or -error) is written
	appRuns bool // the app was told to run it (providerExecuted false)
	in      engine.ToolInput
	args    string // the raw arguments, shown when they are malformed
}

func newStream(w http.ResponseWriter, o Options, s *engine.Session) *stream {
	return &stream{w: w, opts: o, session: s, calls: map[string]*callState{}, known: map[string]bool{}, client: map[string]bool{}}
}

// run streams frames (a replay already taken from the page, or none),
// then the page's, until the response ends or ctx does (the browser left,
// or the gateway stops: the chat can resume).
func (st *stream) run(ctx context.Context, page *engine.Page, frames []engine.Event) {
	st.page = page.ID()
	st.sse = sse.New(st.w, http.Header{"X-Vercel-Ai-Ui-Message-Stream": {"v1"}}, st.opts.WriteTimeout)
	frontend.Pump{SSE: st.sse, KeepAlive: st.opts.KeepAlive, Calls: &st.track, Input: st.input}.Run(ctx, page, frames, st)
}

// Ended reports whether the stream's terminator is written.
func (st *stream) Ended() bool { return st.ended }

// StoppingText is the error chunk's text that ends a response the gateway's
// stop cut.
const StoppingText = "the gateway is stopping (a restart or a deploy): this reply was cut; it runs again once the gateway is back, and resuming the chat (GET /api/chat/{id}/stream) then shows it"

// End ends the response: finish with its reason, or an error chunk when
// the page fell behind or the gateway stops.
func (st *stream) End(why frontend.End, _ []string) {
	switch why {
	case frontend.EndPending:
		st.finish("tool-calls")
	case frontend.EndIdle:
		st.finish(idleReason(st.stop))
	case frontend.EndSlow:
		st.chunk(map[string]any{"type": "error", "errorText": "the stream fell behind the session: resume the chat"})
		st.done()
	case frontend.EndStopping:
		if !st.fresh || st.started {
			// A new response's start waits for its message's id; the
			// error needs none.
			st.start("")
		}
		st.closeText()
		st.chunk(map[string]any{"type": "error", "errorText": StoppingText})
		st.done()
	default:
		st.finish("other")
	}
}

// chunk writes one chunk: data: {json}.
func (st *stream) chunk(v any) { _ = st.sse.JSON(v) }

// done writes the stream's terminator.
func (st *stream) done() {
	_ = st.sse.Data("[DONE]")
	st.ended = true
}

func (st *stream) meta() map[string]any {
	return map[string]any{"gateway": map[string]any{"session": st.session.ID(), "seq": st.seq}}
}

// start writes the start chunk once; messageID may be empty (the client
// continues its last assistant message, or makes an id).
func (st *stream) start(messageID string) {
	if st.started {
		return
	}
	st.started = true
	c := map[string]any{"type": "start", "messageMetadata": st.meta()}
	if messageID != "" {
		c["messageId"] = messageID
	}
	st.chunk(c)
	held := st.held
	st.held = nil
	for _, write := range held {
		write()
	}
}

func (st *stream) openStep() {
	st.start("")
	if !st.step {
		st.step = true
		st.chunk(map[string]any{"type": "start-step"})
	}
}

func (st *stream) closeText() {
	if st.text != "" {
		st.chunk(map[string]any{"type": "text-end", "id": st.text})
		st.text = ""
	}
}

func (st *stream) closeStep() {
	st.closeText()
	if st.step {
		st.step = false
		st.chunk(map[string]any{"type": "finish-step"})
	}
}

// newTurn closes the step of the previous model turn when its calls have
// all finished: a new model turn is a new step.
func (st *stream) newTurn() {
	if st.reset {
		// The client emptied the step and keeps it (reset-step): the
		// turn that runs again fills it, where a new step left it empty.
		st.reset = false
		return
	}
	if st.step && st.text == "" && st.track.Open() == 0 && st.turnDone() {
		st.closeStep()
	}
}

// turnDone: the open step's model turn has ended (its text, if any, closed).
func (st *stream) turnDone() bool { return !st.turnText }

// idleReason is the finish's reason for a session gone idle after a model
// turn that stopped for stop: the AI SDK's names for a turn cut by its
// token limit or a content filter, else "stop".
func idleReason(stop string) string {
	switch stop {
	case model.StopMaxTokens:
		return "length"
	case model.StopContentFilter:
		return "content-filter"
	default:
		return "stop"
	}
}

// finish ends the response.
func (st *stream) finish(reason string) {
	st.start("")
	st.closeStep()
	st.chunk(map[string]any{"type": "finish", "finishReason": reason, "messageMetadata": st.meta()})
	st.done()
}

// Event handles one frame of the page's stream.
func (st *stream) Event(ctx context.Context, page *engine.Page, ev engine.Event) {
	if ev.Seq > 0 {
		st.seq = ev.Seq
	}
	st.sending.See(ev)
	if !st.track.See(ev) {
		return // a sub-agent's text or worker call: not the assistant's
	}
	switch ev.Type {
	case engine.EventMessage:
		var e engine.MessageEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		switch e.Message.Role {
		case "user":
			if st.fresh {
				st.start("msg_" + st.session.ID() + "_" + strconv.FormatInt(ev.Seq, 10))
			}
		case "assistant":
			if !st.turnText && e.Message.Content != "" {
				// The model did not stream: its text comes whole.
				st.newTurn()
				st.openStep()
				st.textN++
				id := "text_" + strconv.Itoa(st.textN)
				st.chunk(map[string]any{"type": "text-start", "id": id})
				st.chunk(map[string]any{"type": "text-delta", "id": id, "delta": e.Message.Content})
				st.chunk(map[string]any{"type": "text-end", "id": id})
			}
			st.turnText = false
		}
	case engine.EventModelDelta:
		var e engine.ModelDeltaEvent
		if json.Unmarshal(ev.Frame, &e) != nil || e.Text == "" {
			return
		}
		if !st.turnText {
			st.newTurn()
		}
		st.turnText = true
		st.openStep()
		if st.text == "" {
			st.textN++
			st.text = "text_" + strconv.Itoa(st.textN)
			st.chunk(map[string]any{"type": "text-start", "id": st.text})
		}
		st.chunk(map[string]any{"type": "text-delta", "id": st.text, "delta": e.Text})
	case engine.EventModelFinished:
		st.closeText()
		st.reset = false // the turn run again is done: the next one opens its own step
		var e struct {
			StopReason string `json:"stopReason"`
		}
		_ = json.Unmarshal(ev.Frame, &e)
		st.stop = e.StopReason
	case engine.EventModelDiscarded:
		// The partial reply will never finish: drop the step's parts.
		st.closeText()
		st.turnText = false
		if st.step {
			st.chunk(map[string]any{"type": "reset-step"})
			st.reset = true
		}
	case engine.EventToolStarted:
		var e engine.ToolStartedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := st.call(e.ID, e.Name)
		st.track.Started(e.ID)
		c.client = e.Handler == engine.HandlerClient
		c.in, c.args = e.Input, e.Arguments
		if c.input || st.known[e.ID] {
			return
		}
		st.showInput(c, e.ID)
		if !c.client {
			// It runs on the server: the app shows it and gets its
			// output, but does not run it. A client call's input waits
			// for its delivery here (tool.call: the app runs it) or to
			// another page (tool.leased: it shows it).
			st.inputAvailable(c, e.ID, e.Input, true, nil)
		}
	case engine.EventToolApproval:
		// It waits for the user. A worker's call is asked of the app (its
		// input, then tool-approval-request, the approval's id the
		// digest that binds the answer to the call): the app answers with
		// addToolApprovalResponse, which the next POST carries. A client
		// call's input waits for its delivery, which would have the app
		// run it at once: it is asked on a /ws page, and shown with its
		// outcome.
		var e engine.ToolApprovalEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := st.call(e.ID, e.Name)
		c.in, c.args = e.Input, e.Arguments
		if e.Handler != engine.HandlerWorker || st.known[e.ID] {
			return
		}
		st.showInput(c, e.ID)
		st.inputAvailable(c, e.ID, e.Input, true, nil)
		st.chunk(map[string]any{"type": "tool-approval-request", "approvalId": e.Digest, "toolCallId": e.ID})
		st.track.Asked(e.ID)
	case engine.EventToolLeased:
		var e engine.ToolLeasedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		if c := st.calls[e.ID]; c != nil && c.shown && !c.input && e.Page != "" && e.Page != st.page {
			st.inputAvailable(c, e.ID, c.in, true, nil)
		}
	case engine.FrameToolCall:
		var e engine.ClientCall
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := st.call(e.ID, e.Name)
		c.client = true
		if !st.track.Delivered(ctx, page, e) {
			return // bad input, answered: tool.finished follows
		}
		if st.known[e.ID] || c.appRuns {
			return // the app has it, and runs it or has answered it
		}
		// Shown as running in another page, which left since: now the
		// app runs it.
		c.input = false
		st.showInput(c, e.ID)
		st.inputAvailable(c, e.ID, e.Input, false, map[string]any{"gateway": map[string]any{"attempt": e.Attempt, "deadline": e.Deadline}})
	case engine.EventToolFinished:
		var e engine.ToolFinishedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		if st.fresh && !st.started && st.calls[e.ID] == nil && ev.Seq <= st.stopped {
			// A call of an earlier response, settled as this response's
			// page attached (stopped by its message: Interrupts): shown
			// after start, which waits for the message's id.
			st.held = append(st.held, func() { st.finished(e) })
			return
		}
		st.finished(e)
	case engine.EventClientEvent:
		var e engine.ClientEventEvent
		if json.Unmarshal(ev.Frame, &e) == nil && e.Name != "" {
			part := map[string]any{"type": "data-" + e.Name, "data": e.Data, "transient": true}
			if st.fresh && !st.started {
				st.held = append(st.held, func() { st.chunk(part) }) // its user message, and id, follow
				return
			}
			st.start("")
			st.chunk(part)
		}
	case engine.EventError, engine.EventGuardTripped:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Frame, &e)
		// The client takes an error chunk as the end of the request (the
		// chat's error); the session goes on, and the next request shows
		// what follows.
		st.start("")
		st.closeText()
		st.chunk(map[string]any{"type": "error", "errorText": e.Message})
		st.done()
	case engine.EventSessionIdle:
		if ev.Seq > st.stopped && !st.sending.Waiting() {
			st.finish(idleReason(st.stop))
		}
	case engine.EventSessionEnded:
		st.finish("other")
	}
}

// finished shows a call's outcome (tool.finished), after its input when
// the response has not shown that.
func (st *stream) finished(e engine.ToolFinishedEvent) {
	c := st.call(e.ID, e.Name)
	st.track.Finished(e.ID)
	c.client = c.client || st.client[e.ID]
	if !c.input && !st.known[e.ID] {
		if c.in.Status == "" && c.args == "" {
			// It started before this stream (a follow-up whose
			// message left its part out): its input, as it started.
			c.args, c.in, _ = st.session.CallInput(e.ID)
		}
		st.showInput(c, e.ID)
		st.inputAvailable(c, e.ID, c.in, true, nil)
	}
	st.start("")
	// As this stream's input said, when it said: the app ran it, or
	// the server settled it (a client call whose input the engine
	// refused, or that another page ran). A call of an earlier stream
	// is the app's when it is a client call.
	providerExecuted := !c.client
	if c.input {
		providerExecuted = !c.appRuns
	}
	if e.OK {
		st.chunk(map[string]any{"type": "tool-output-available", "toolCallId": e.ID, "output": resultValue(e.Result), "providerExecuted": providerExecuted})
	} else {
		st.chunk(map[string]any{"type": "tool-output-error", "toolCallId": e.ID, "errorText": e.Error, "providerExecuted": providerExecuted})
	}
}

func (st *stream) call(id, name string) *callState {
	c := st.calls[id]
	if c == nil {
		c = &callState{name: name}
		st.calls[id] = c
	}
	return c
}

// showInput writes tool-input-start once.
func (st *stream) showInput(c *callState, id string) {
	if c.shown {
		return
	}
	c.shown = true
	st.openStep()
	chunk := map[string]any{"type": "tool-input-start", "toolCallId": id, "toolName": c.name}
	if !c.client || c.in.Status == engine.InputMalformed || c.in.Status == engine.InputInvalid {
		// It runs on the server, or the gateway settles it (its input
		// is bad): the app runs nothing.
		chunk["providerExecuted"] = true
	}
	st.chunk(chunk)
}

// inputAvailable writes the call's input once: tool-input-available, or
// tool-input-error when the engine found it malformed or invalid.
// providerExecuted false makes the app run it (onToolCall).
func (st *stream) inputAvailable(c *callState, id string, in engine.ToolInput, providerExecuted bool, md map[string]any) {
	if c.input {
		return
	}
	c.input = true
	c.appRuns = !providerExecuted
	chunk := map[string]any{"toolCallId": id, "toolName": c.name, "providerExecuted": providerExecuted}
	if md != nil {
		chunk["providerMetadata"] = md
	}
	switch in.Status {
	case engine.InputMalformed, engine.InputInvalid:
		chunk["type"] = "tool-input-error"
		chunk["input"] = in.Value
		if in.Value == nil {
			chunk["input"] = c.args // not JSON: the text as the model wrote it
		}
		chunk["errorText"] = in.Error
	default:
		chunk["type"] = "tool-input-available"
		chunk["input"] = in.Value
		if in.Value == nil {
			chunk["input"] = map[string]any{}
		}
	}
	st.chunk(chunk)
}

// resultValue reads a result as the model does: JSON when it parses, else
// the string.
func resultValue(result string) any {
	var v any
	if json.Unmarshal([]byte(result), &v) == nil {
		return json.RawMessage(result)
	}
	return result
}
