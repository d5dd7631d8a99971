package agui

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
	page  string

	text     string // the open text message's id; "": none
	skipText bool   // the replay starts inside a text message the front end has
	lastText string // the model turn's message id, the parent of its calls

	calls    map[string]*call
	nest     nesting.Calls   // which calls sub-agents made
	known    map[string]bool // calls the input's messages already show
	answered map[string]bool // calls this run's input answered
}

type call struct {
	client   bool
	shown    bool
	mine     bool
	finished bool
}

func newRun(w http.ResponseWriter, o Options, in runInput) *run {
	return &run{w: w, opts: o, thread: in.ThreadID, runID: in.RunID,
		calls: map[string]*call{}, known: map[string]bool{}, answered: map[string]bool{}}
}

func (r *run) emit(v map[string]any) { _ = r.sse.JSON(v) }

// run streams until the run ends or ctx does.
func (r *run) run(ctx context.Context, page *engine.Page) {
	r.page = page.ID()
	r.sse = sse.New(r.w, nil, r.opts.WriteTimeout)
	keepalive := time.NewTicker(r.opts.KeepAlive)
	defer keepalive.Stop()
	r.emit(map[string]any{"type": "RUN_STARTED", "threadId": r.thread, "runId": r.runID})
	var frames []engine.Event
	first := true
	for !r.ended {
		if r.sse.Err() != nil {
			return // the browser stopped reading
		}
		frames = page.Take(frames)
		news := false
		for _, ev := range frames {
			news = news || ev.Seq > 0
			r.event(ctx, page, ev)
			if r.ended {
				return
			}
		}
		if len(frames) > 0 {
			if page.Queued() == 0 {
				if ids := r.pending(); len(ids) > 0 {
					r.finish(ids)
				} else if first && !r.input && !news {
					// Nothing to do, and nothing happened since the last
					// run ended: the session is as it left it, idle.
					r.finish(nil)
				}
			}
			first = false
			continue
		}
		select {
		case <-page.Ready():
		case <-page.Done():
			if page.Queued() > 0 {
				continue
			}
			if errors.Is(page.Err(), engine.ErrSlowSubscriber) {
				r.fail("the run fell behind the session: run again", "slow_subscriber")
				return
			}
			r.finish(nil)
			return
		case <-keepalive.C:
			_ = r.sse.Comment("keepalive")
		case <-ctx.Done():
			return
		}
	}
}

// pending names the open calls when all are front-end calls this run
// delivered; nil otherwise.
func (r *run) pending() []string {
	var ids []string
	for id, c := range r.calls {
		if c.mine && !c.finished {
			ids = append(ids, id)
		}
	}
	for id, c := range r.calls {
		// A delegated call waits on its sub-agent, which may wait on us.
		if !c.finished && !c.mine && !r.nest.Waiting(id, ids) {
			return nil
		}
	}
	return ids
}

func (r *run) closeText() {
	if r.text != "" {
		r.emit(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": r.text})
		r.text = ""
	}
}

func (r *run) finish(pending []string) {
	r.closeText()
	outcome := map[string]any{"type": "success"}
	if len(pending) > 0 {
		outcome["pendingToolCallIds"] = pending
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

// event handles one frame of the page's stream.
func (r *run) event(ctx context.Context, page *engine.Page, ev engine.Event) {
	if !r.nest.Visible(ev) {
		return // a sub-agent's text or worker call: not the assistant's
	}
	switch ev.Type {
	case engine.EventModelDelta:
		var e engine.ModelDeltaEvent
		if json.Unmarshal(ev.Frame, &e) != nil || e.Text == "" || r.skipText {
			return
		}
		if r.text == "" {
			r.text = msgID(ev.Seq)
			r.lastText = r.text
			r.emit(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": r.text, "role": "assistant"})
		}
		r.emit(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": r.text, "delta": e.Text})
	case engine.EventModelFinished, engine.EventModelDiscarded:
		r.skipText = false
		r.closeText()
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
	case engine.EventToolStarted:
		var e engine.ToolStartedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := r.call(e.ID)
		c.client = e.Handler == engine.HandlerClient
		if c.shown || r.known[e.ID] {
			return
		}
		c.shown = true
		parent := r.lastText
		if parent == "" {
			parent = msgID(ev.Seq)
			r.lastText = parent
		}
		r.closeText()
		r.emit(map[string]any{"type": "TOOL_CALL_START", "toolCallId": e.ID, "toolCallName": e.Name, "parentMessageId": parent})
		if e.Arguments != "" {
			r.emit(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": e.ID, "delta": e.Arguments})
		}
		r.emit(map[string]any{"type": "TOOL_CALL_END", "toolCallId": e.ID})
	case engine.FrameToolCall:
		var e engine.ClientCall
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := r.call(e.ID)
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
	case engine.FrameToolCancel:
		var e engine.ToolCancelFrame
		if json.Unmarshal(ev.Frame, &e) == nil {
			if c := r.calls[e.ID]; c != nil {
				c.mine = false
			}
		}
	case engine.EventToolFinished:
		var e engine.ToolFinishedEvent
		if json.Unmarshal(ev.Frame, &e) != nil {
			return
		}
		c := r.call(e.ID)
		c.finished, c.mine = true, false
		if e.OK && r.answered[e.ID] {
			return // the front end's own tool message holds the result
		}
		content := e.Result
		if !e.OK {
			content = e.Error
		}
		r.closeText()
		r.emit(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": msgID(ev.Seq) + "r", "toolCallId": e.ID, "content": content, "role": "tool"})
	case engine.EventClientEvent:
		var e engine.ClientEventEvent
		if json.Unmarshal(ev.Frame, &e) == nil && e.Name != "" {
			r.emit(map[string]any{"type": "CUSTOM", "name": e.Name, "value": e.Data})
		}
	case engine.EventError, engine.EventGuardTripped:
		var e struct {
			Code    string `json:"code"`
			Guard   string `json:"guard"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Frame, &e)
		code := e.Code
		if code == "" && e.Guard != "" {
			code = "guard." + e.Guard
		}
		r.fail(e.Message, code)
	case engine.EventSessionIdle:
		if ev.Seq > r.base || !r.input {
			r.finish(nil)
		}
	case engine.EventSessionEnded:
		r.finish(nil)
	}
}

func (r *run) call(id string) *call {
	c := r.calls[id]
	if c == nil {
		c = &call{}
		r.calls[id] = c
	}
	return c
}
