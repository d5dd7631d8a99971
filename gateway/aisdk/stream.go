package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/nesting"
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
	session string

	fresh   bool // a new response: start carries the user message's id
	input   bool // the request gave the session something to do
	started bool // the start chunk is written
	ended   bool
	seq     int64 // the last session event seen: the metadata's seq

	step     bool   // a step is open
	text     string // the open text part's id; "": none
	turnText bool   // the model turn streamed text (deltas)
	textN    int

	calls  map[string]*callState
	nest   nesting.Calls   // which calls sub-agents made
	known  map[string]bool // calls the client's message already shows
	client map[string]bool // of those, the ones the app runs
	page   string
}

// callState is what the stream knows of one call.
type callState struct {
	name     string
	client   bool
	shown    bool // tool-input-start is written
	input    bool // tool-input-available (or -error) is written
	appRuns  bool // the app was told to run it (providerExecuted false)
	in       engine.ToolInput
	args     string // the raw arguments, shown when they are malformed
	mine     bool   // a client attempt is delivered to this stream and waits
	finished bool
}

func newStream(w http.ResponseWriter, o Options, s *engine.Session) *stream {
	return &stream{w: w, opts: o, session: s.ID(), calls: map[string]*callState{}, known: map[string]bool{}, client: map[string]bool{}}
}

// run streams frames (a replay already taken from the page, or none),
// then the page's, until the response ends or ctx does.
func (st *stream) run(ctx context.Context, page *engine.Page, frames []engine.Event) {
	st.page = page.ID()
	st.sse = sse.New(st.w, http.Header{"X-Vercel-Ai-Ui-Message-Stream": {"v1"}}, st.opts.WriteTimeout)
	keepalive := time.NewTicker(st.opts.KeepAlive)
	defer keepalive.Stop()
	var buf []engine.Event
	first := true
	for !st.ended {
		if st.sse.Err() != nil {
			return // the browser stopped reading: the chat can resume
		}
		if frames == nil {
			buf = page.Take(buf)
			frames = buf
		}
		news := false
		for _, ev := range frames {
			news = news || ev.Seq > 0
			st.event(ctx, page, ev)
			if st.ended {
				return
			}
		}
		if len(frames) > 0 {
			frames = nil
			if page.Queued() == 0 {
				switch {
				case st.pending():
					st.finish("tool-calls")
				case first && !st.input && !news:
					// Nothing to do (no output it could take), and nothing
					// happened since the last stream ended: the session is
					// as it left it, idle.
					st.finish("stop")
				}
			}
			first = false
			continue
		}
		frames = nil
		select {
		case <-page.Ready():
		case <-page.Done():
			if page.Queued() > 0 {
				continue
			}
			if errors.Is(page.Err(), engine.ErrSlowSubscriber) {
				st.chunk(map[string]any{"type": "error", "errorText": "the stream fell behind the session: resume the chat"})
				st.done()
				return
			}
			st.finish("other")
			return
		case <-keepalive.C:
			_ = st.sse.Comment("keepalive")
		case <-ctx.Done():
			return // the browser left, or the gateway stops: the chat can resume
		}
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
	return map[string]any{"gateway": map[string]any{"session": st.session, "seq": st.seq}}
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
	if st.step && st.text == "" && st.callsOpen() == 0 && st.turnDone() {
		st.closeStep()
	}
}

// turnDone: the open step's model turn has ended (its text, if any, closed).
func (st *stream) turnDone() bool { return !st.turnText }

func (st *stream) callsOpen() int {
	n := 0
	for _, c := range st.calls {
		if !c.finished {
			n++
		}
	}
	return n
}

// pending reports whether the response waits only on client calls this
// stream delivered.
func (st *stream) pending() bool {
	var mine []string
	for id, c := range st.calls {
		if c.mine && !c.finished {
			mine = append(mine, id)
		}
	}
	if len(mine) == 0 {
		return false
	}
	for id, c := range st.calls {
		// A delegated call waits on its sub-agent, which may wait on us.
		if !c.finished && !c.mine && !st.nest.Waiting(id, mine) {
			return false
		}
	}
	return true
}

// finish ends the response.
func (st *stream) finish(reason string) {
	st.start("")
	st.closeStep()
	st.chunk(map[string]any{"type": "finish", "finishReason": reason, "messageMetadata": st.meta()})
	st.done()
}

// event handles one frame of the page's stream.
func (st *stream) event(ctx context.Context, page *engine.Page, ev engine.Event) {
	if ev.Seq > 0 {
		st.seq = ev.Seq
	}
	if !st.nest.Visible(ev) {
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
				st.start("msg_" + st.session + "_" + strconv.FormatInt(ev.Seq, 10))
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
	case engine.EventModelDiscarded:
		// The partial reply will never finish: drop the step's parts.
		st.closeText()
		st.turnText = false
		if st.step {
			st.chunk(map[string]any{"type": "reset-step"})
		}
	case engine.EventToolStarted:
		var e engine.ToolStartedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := st.call(e.ID, e.Name)
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
		if e.Proposed != nil {
			// Bad input: answer with the ready-made error, as the /ws SDK
			// does by default; its outcome follows in tool.finished.
			p := *e.Proposed
			p.ID, p.Attempt = e.ID, e.Attempt
			_ = page.Answer(ctx, p)
			return
		}
		c.mine = true
		if st.known[e.ID] || c.appRuns {
			return // the app has it, and runs it or has answered it
		}
		// Shown as running in another page, which left since: now the
		// app runs it.
		c.input = false
		st.showInput(c, e.ID)
		st.inputAvailable(c, e.ID, e.Input, false, map[string]any{"gateway": map[string]any{"attempt": e.Attempt, "deadline": e.Deadline}})
	case engine.FrameToolCancel:
		var e engine.ToolCancelFrame
		if json.Unmarshal(ev.Frame, &e) == nil {
			if c := st.calls[e.ID]; c != nil {
				c.mine = false
			}
		}
	case engine.EventToolFinished:
		var e engine.ToolFinishedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := st.call(e.ID, e.Name)
		c.finished, c.mine = true, false
		c.client = c.client || st.client[e.ID]
		if !c.input && !st.known[e.ID] {
			st.showInput(c, e.ID)
			st.inputAvailable(c, e.ID, c.in, true, nil)
		}
		st.start("")
		if e.OK {
			st.chunk(map[string]any{"type": "tool-output-available", "toolCallId": e.ID, "output": resultValue(e.Result), "providerExecuted": !c.client})
		} else {
			st.chunk(map[string]any{"type": "tool-output-error", "toolCallId": e.ID, "errorText": e.Error, "providerExecuted": !c.client})
		}
	case engine.EventClientEvent:
		var e engine.ClientEventEvent
		if json.Unmarshal(ev.Frame, &e) == nil && e.Name != "" {
			st.start("")
			st.chunk(map[string]any{"type": "data-" + e.Name, "data": e.Data, "transient": true})
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
		st.finish("stop")
	case engine.EventSessionEnded:
		st.finish("other")
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
	if !c.client {
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
