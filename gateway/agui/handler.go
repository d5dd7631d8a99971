package agui

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
)

// Options configure a Handler.
type Options struct {
	// Find returns the request's browser's session for a thread id,
	// opening one when create is set and there is none. Its error may
	// carry an HTTP status (a StatusCode() int method); else it is
	// answered with 500. Required.
	Find func(r *http.Request, thread string, create bool) (*engine.Session, error)
	// Logger, Buffer, WriteTimeout and KeepAlive: the runs' options and
	// their defaults (frontend.DefaultBuffer, frontend.DefaultKeepAlive);
	// Check and Refused: a request's limits, and its refusals.
	frontend.Options
}

// MaxThreadIDBytes is the longest threadId a run may name.
const MaxThreadIDBytes = 256

// Handler serves AG-UI runs.
type Handler struct {
	opts Options
}

// New returns a Handler.
func New(o Options) *Handler {
	o.Options = o.Options.WithDefaults()
	return &Handler{opts: o}
}

// runInput is the part of RunAgentInput the gateway reads.
type runInput struct {
	ThreadID string    `json:"threadId"`
	RunID    string    `json:"runId"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// message is an AG-UI message: user, assistant (with toolCalls) or tool.
type message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Error      string          `json:"error"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"toolCalls"`
}

// text is a message's content as text: the string, or its text parts.
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// fail answers a run the handler cannot serve, before any event.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, err := frontend.Status(err, engine.ErrBadRequest)
	h.opts.LogRefused("AG-UI run refused", "path", r.URL.Path, "status", status, "err", err)
	if h.opts.Refused != nil {
		h.opts.Refused(err)
	}
	frontend.Refuse(w, err, status)
}

func decode(r *http.Request) (runInput, error) {
	var in runInput
	if err := frontend.DecodeJSON(r, &in, "a RunAgentInput ({threadId, runId, messages, tools})"); err != nil {
		return in, err
	}
	switch {
	case in.ThreadID == "":
		return in, frontend.BadRequest("threadId is empty")
	case len(in.ThreadID) > MaxThreadIDBytes:
		return in, frontend.BadRequest("threadId is %d bytes long, at most %d", len(in.ThreadID), MaxThreadIDBytes)
	case in.RunID == "":
		return in, frontend.BadRequest("runId is empty")
	}
	for i, m := range in.Messages {
		if !roles[m.Role] {
			return in, frontend.BadRequest("messages[%d]'s role is %.64q, not an AG-UI role (developer, system, assistant, user, tool, activity, reasoning)", i, m.Role)
		}
	}
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "user" && strings.TrimSpace(in.Messages[n-1].text()) == "" {
		return in, frontend.BadRequest("the last message (the user's) has no text, or only white space")
	}
	return in, nil
}

// roles are AG-UI's message roles (core 1.0's Message).
var roles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true, "tool": true, "activity": true, "reasoning": true}

// ServeHTTP runs the agent: a new user message (the input's last message
// is the user's), or the results of front-end tools (tool messages after
// the last assistant message); then the session's events until the run
// ends.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in, err := decode(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var last *message
	if n := len(in.Messages); n > 0 {
		last = &in.Messages[n-1]
	}
	userMessage := last != nil && last.Role == "user"
	tools := make([]string, 0, len(in.Tools))
	for _, t := range in.Tools {
		tools = append(tools, t.Name)
	}
	if h.opts.Check != nil {
		message := ""
		if userMessage {
			message = last.text()
		}
		if err := h.opts.Check(message, tools); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	sess, err := h.opts.Find(r, in.ThreadID, userMessage)
	if status, _ := frontend.Status(err); err != nil && len(in.Messages) == 0 && status == http.StatusNotFound {
		// Nothing to do on a thread this browser has not begun: the run
		// says so, as on one it has, and opens no session.
		run := newRun(w, h.opts, in)
		run.begin()
		run.finish(nil)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	run := newRun(w, h.opts, in)
	// A run starts where the input's messages stop (the last gw<seq> among
	// them), with a new message too: what settled while no run was open
	// (a call's timeout, the reply after it) comes first, in order.
	base := sess.LastSeq()
	after := base
	if seq, text := lastSeen(in.Messages); seq > 0 && seq <= base {
		after = seq
		if text {
			// The front end has that text message, whole or cut: the
			// replay starts with its first delta, and what it holds of
			// it is not sent again (run.have).
			after = seq - 1
			run.have, run.haveSeq = lastTextOf(in.Messages, msgID(seq)), seq
			run.lastText = msgID(seq)
		}
	}
	// Answers: the tool messages after the last assistant message, before
	// a new user message too.
	answers := in.Messages
	if userMessage {
		answers = answers[:len(answers)-1]
	}
	for i := len(answers) - 1; i >= 0 && answers[i].Role == "tool"; i-- {
		if err := h.answer(ctx, sess, answers[i], run); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	for _, m := range in.Messages {
		for _, tc := range m.ToolCalls {
			run.known[tc.ID] = true
		}
		if m.Role == "tool" && m.ToolCallID != "" {
			run.sent[m.ToolCallID] = m
		}
	}
	var sent frontend.Sent
	if userMessage {
		if sent, err = frontend.FindSent(ctx, sess, last.ID, last.text()); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	// A new message stops the calls that wait on the front end
	// (Interrupts): the app typed past its tools, and its answers to them
	// would not come. A refused message stops nothing (the Attach fails).
	interrupts := userMessage && !sent.Took
	if sent.Seq > 0 {
		after = min(after, sent.Seq-1)
	}
	o := engine.AttachOptions{After: after, Tools: tools, Handoff: true, Interrupts: interrupts, Buffer: h.opts.Buffer}
	if interrupts {
		o.Message = last.text()
	}
	page, err := sess.Attach(ctx, o)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer page.Detach()
	run.base = base
	switch {
	case sent.Seq > 0:
		// Taken already (the same messages run again: a retry, a
		// reload, a run after a restart): the run is that message's.
		run.base, run.input = sent.Seq-1, true
	case userMessage:
		run.base = sess.LastSeq() // the end of a turn it stopped is not the run's
		if err := run.sending.Send(ctx, page, last.ID, last.text()); err != nil {
			h.fail(w, r, err)
			return
		}
		run.input = true
	}
	run.run(ctx, page)
}

// lastTextOf is the text of the input's message of id.
func lastTextOf(msgs []message, id string) string {
	for _, m := range msgs {
		if m.ID == id {
			return m.text()
		}
	}
	return ""
}

// answer takes a tool message as the answer to its call's current
// attempt. One the call cannot take (it settled: history, a duplicate, too
// late; or it is not a client call) is skipped: its outcome is in the
// stream. Only a failure of the session is an error.
func (h *Handler) answer(ctx context.Context, sess *engine.Session, m message, run *run) error {
	if m.ToolCallID == "" {
		return nil
	}
	var a engine.Action
	if m.Error != "" {
		a = engine.ToolError{ID: m.ToolCallID, Error: m.Error, Code: engine.CodeToolFailed}
	} else {
		a = engine.ToolResult{ID: m.ToolCallID, Result: resultJSON(m.text())}
	}
	took, err := frontend.Answer(ctx, sess, m.ToolCallID, a, h.opts.Logger, "AG-UI tool result not taken")
	if took {
		run.answered[m.ToolCallID] = true
		run.input = true
	}
	return err
}

// resultJSON is a tool message's content as a result: the JSON value it
// holds, or the text as a JSON string.
func resultJSON(content string) json.RawMessage {
	if json.Valid([]byte(content)) {
		return json.RawMessage(content)
	}
	b, _ := engine.Marshal(content)
	return b
}

// idPrefix marks the message ids the gateway mints: gw<seq>, or gw<seq>r
// for a tool result, seq the session event that made the message.
const idPrefix = "gw"

// lastSeen is the highest seq among the ids of the messages the gateway
// minted: the last event the front end got, or, when text is set, the
// first delta of a text message it has, whole or in part.
func lastSeen(msgs []message) (seq int64, text bool) {
	for _, m := range msgs {
		rest, ok := strings.CutPrefix(m.ID, idPrefix)
		if !ok {
			continue
		}
		num, result := strings.CutSuffix(rest, "r")
		if n, err := strconv.ParseInt(num, 10, 64); err == nil && n > seq {
			seq, text = n, !result
		}
	}
	return seq, text
}
