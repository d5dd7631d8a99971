package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
)

// Options configure a Handler.
type Options struct {
	// Find returns the request's browser's session for a chat id, opening
	// one when create is set and there is none. Its error may carry an
	// HTTP status (a StatusCode() int method); else it is answered with
	// 500. Required.
	Find func(r *http.Request, chat string, create bool) (*engine.Session, error)
	// Logger, Buffer, WriteTimeout and KeepAlive: the streams' options and
	// their defaults (frontend.DefaultBuffer, frontend.DefaultKeepAlive);
	// Check and Refused: a request's limits, and its refusals.
	frontend.Options
}

// MaxChatIDBytes is the longest chat id a request may name.
const MaxChatIDBytes = 256

// Handler serves the UI message stream.
type Handler struct {
	opts Options
}

// New returns a Handler.
func New(o Options) *Handler {
	o.Options = o.Options.WithDefaults()
	return &Handler{opts: o}
}

// request is the body DefaultChatTransport posts.
type request struct {
	ID        string      `json:"id"`
	Messages  []uiMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
}

// uiMessage is the part of a UIMessage the gateway reads.
type uiMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Parts    []uiPart        `json:"parts"`
	Metadata json.RawMessage `json:"metadata"`
}

// uiPart is a message part: text, or a tool's ("tool-NAME" or
// "dynamic-tool"); other parts are ignored.
type uiPart struct {
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	ToolCallID       string          `json:"toolCallId"`
	State            string          `json:"state"`
	Output           json.RawMessage `json:"output"`
	ErrorText        string          `json:"errorText"`
	ProviderExecuted bool            `json:"providerExecuted"`
	// Approval is the app's answer to a tool-approval-request (state
	// approval-responded): its id is the call's digest.
	Approval *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
	} `json:"approval"`
}

func (p uiPart) isTool() bool {
	return p.ToolCallID != "" && (strings.HasPrefix(p.Type, "tool-") || p.Type == "dynamic-tool")
}

// metadata is what the gateway puts in the assistant message's metadata,
// and reads back from the next request: the session's seq the stream ended
// at, so the next stream starts where it stopped.
type metadata struct {
	Gateway *struct {
		Session string `json:"session"`
		Seq     int64  `json:"seq"`
	} `json:"gateway"`
}

// fail answers a request the handler cannot serve, before any chunk.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, err := frontend.Status(err)
	h.opts.LogRefused("AI SDK request refused", "path", r.URL.Path, "status", status, "err", err)
	if h.opts.Refused != nil {
		h.opts.Refused(err)
	}
	frontend.Refuse(w, err, status)
}

// decode reads and checks the posted body.
func decode(r *http.Request) (request, error) {
	var req request
	if err := frontend.DecodeJSON(r, &req, "a chat request ({id, messages, trigger})"); err != nil {
		return req, err
	}
	switch {
	case req.ID == "":
		return req, frontend.BadRequest("the request names no chat: id is empty")
	case len(req.ID) > MaxChatIDBytes:
		return req, frontend.BadRequest("the chat id is %d bytes long, at most %d", len(req.ID), MaxChatIDBytes)
	case len(req.Messages) == 0:
		return req, frontend.BadRequest("the request has no messages")
	case req.Trigger == "regenerate-message":
		return req, frontend.BadRequest("regenerate is not supported: the session's transcript cannot be rewritten; send the message again instead")
	case req.Trigger != "" && req.Trigger != "submit-message":
		return req, frontend.BadRequest("trigger %.64q is not one the gateway takes: submit-message", req.Trigger)
	}
	switch last := req.Messages[len(req.Messages)-1]; last.Role {
	case "user":
		if strings.TrimSpace(text(last)) == "" {
			return req, frontend.BadRequest("the last message (the user's) has no text, or only white space")
		}
	case "assistant":
	default:
		return req, frontend.BadRequest("the last message's role is %.64q: want user (a new message) or assistant (tool outputs)", last.Role)
	}
	return req, nil
}

// text joins a message's text parts.
func text(m uiMessage) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Post serves POST /api/chat: a new user message (the last message is the
// user's), or the outputs of client tools (the last message is the
// assistant's, with tool parts addToolOutput filled); then the session's
// events until the response ends.
func (h *Handler) Post(w http.ResponseWriter, r *http.Request) {
	req, err := decode(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" && h.opts.Check != nil {
		if err := h.opts.Check(text(last), nil); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	sess, err := h.opts.Find(r, req.ID, last.Role == "user")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	st := newStream(w, h.opts, sess)
	if last.Role == "user" {
		h.send(ctx, w, r, sess, st, last)
		return
	}
	// Tool outputs: answer the calls first, then replay from where the
	// last stream stopped, so the outcomes and what followed come in order.
	after := sess.LastSeq()
	var md metadata
	if json.Unmarshal(last.Metadata, &md) == nil && md.Gateway != nil && md.Gateway.Session == sess.ID() && md.Gateway.Seq <= after {
		after = md.Gateway.Seq
	}
	for _, p := range last.Parts {
		if !p.isTool() {
			continue
		}
		st.known[p.ToolCallID] = true
		st.client[p.ToolCallID] = !p.ProviderExecuted
		took, err := h.answer(ctx, sess, p)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		st.input = st.input || took
	}
	// A response with nothing new says where it stands, not seq 0: posted
	// back, that would replay the whole chat.
	st.seq = after
	page, err := sess.Attach(ctx, engine.AttachOptions{After: after, AnyClientTool: true, Handoff: true, Buffer: h.opts.Buffer})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer page.Detach()
	st.run(ctx, page, nil)
}

// send serves a new user message: its response streams from the message
// on. The same message posted again (its id: a retry, or a follow-up of an
// app that lost the stream before any of the reply) is not sent twice: the
// response is that message's, replayed from it.
func (h *Handler) send(ctx context.Context, w http.ResponseWriter, r *http.Request, sess *engine.Session, st *stream, last uiMessage) {
	content := text(last)
	sent, err := frontend.FindSent(ctx, sess, last.ID, content)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	st.fresh, st.input = true, true
	if sent.Seq > 0 {
		st.seq = sent.Seq - 1
		page, err := sess.Attach(ctx, engine.AttachOptions{After: st.seq, AnyClientTool: true, Handoff: true, Buffer: h.opts.Buffer})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		defer page.Detach()
		st.run(ctx, page, nil)
		return
	}
	st.seq = sess.LastSeq() // the metadata's seq: where the response starts, until it has events
	// Interrupts: a call of an earlier response that still waits for the
	// app is stopped, not delivered again: useChat would run it a second
	// time, in a new message, and post its answer with nothing (its
	// sendAutomaticallyWhen reads the last one). A copy of a message the
	// chat took stops nothing: the first did; nor does a message the
	// session refuses (the Attach fails).
	page, err := sess.Attach(ctx, engine.AttachOptions{After: st.seq, AnyClientTool: true, Handoff: true, Interrupts: !sent.Took, Message: content, Buffer: h.opts.Buffer})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer page.Detach()
	st.stopped = sess.LastSeq()
	if err := st.sending.Send(ctx, page, last.ID, content); err != nil {
		h.fail(w, r, err)
		return
	}
	st.run(ctx, page, nil)
}

// answer takes a tool part's output as the answer to its call's current
// attempt, and reports whether the call took it. A part that is not a client's output (a worker's, or one still
// waiting) is skipped; so is one the call cannot take (it settled: the
// part is history, a duplicate, or too late; its outcome is in the
// stream). Only a failure of the session is an error.
func (h *Handler) answer(ctx context.Context, sess *engine.Session, p uiPart) (took bool, err error) {
	if p.State == "approval-responded" && p.Approval != nil && p.Approval.Approved != nil {
		return frontend.Approve(ctx, sess, engine.ToolApprove{ID: p.ToolCallID, Digest: p.Approval.ID, Approved: *p.Approval.Approved}, h.opts.Logger, "AI SDK approval not taken")
	}
	if p.ProviderExecuted {
		return false, nil
	}
	var a engine.Action
	switch p.State {
	case "output-available":
		out := p.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		a = engine.ToolResult{ID: p.ToolCallID, Result: out}
	case "output-error":
		a = engine.ToolError{ID: p.ToolCallID, Error: p.ErrorText, Code: engine.CodeToolFailed}
	default:
		return false, nil
	}
	return frontend.Answer(ctx, sess, p.ToolCallID, a, h.opts.Logger, "AI SDK tool output not taken")
}

// Resume serves GET /api/chat/{id}/stream: the current response again,
// from the user message that started it, then live until it ends. 204 when
// the chat has no response in progress (it is idle, or unknown).
func (h *Handler) Resume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" || len(id) > MaxChatIDBytes {
		h.fail(w, r, frontend.BadRequest("the chat id is empty or over %d bytes", MaxChatIDBytes))
		return
	}
	sess, err := h.opts.Find(r, id, false)
	var coded interface{ StatusCode() int }
	if errors.As(err, &coded) && coded.StatusCode() == http.StatusNotFound {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	response, through, peek, err := currentResponse(ctx, sess)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if peek == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// The page that streams starts where the peek's replay ended.
	page, err := sess.Attach(ctx, engine.AttachOptions{After: through, AnyClientTool: true, Handoff: true, Buffer: h.opts.Buffer})
	peek.Detach() // once the page is there: the session is never left without one
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer page.Detach()
	// Attach queues session.opened and its replay at once, in one step of
	// the session: one Take has them all. A message another tab sent since
	// the peek starts the response.
	frames := page.Take(nil)
	if len(frames) == 0 {
		// Dropped as slow before its first Take (the peek's Detach waited
		// for a busy session while a turn streamed): as a stream would end.
		h.fail(w, r, &frontend.StatusError{Status: http.StatusServiceUnavailable,
			Err: errors.New("the chat's stream went on faster than this response could start: resume again")})
		return
	}
	replay, _ := lastResponse(append(response, frames[1:]...))
	if !inProgress(replay) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	st := newStream(w, h.opts, sess)
	st.fresh = true
	st.run(ctx, page, replay)
}

// currentResponse reads the chat's last response, from its user message
// on (frontend.Peek), and returns it with the seq its replay ended at, and
// the page that read it, attached, for the caller to detach; no page when
// the chat has no user message.
func currentResponse(ctx context.Context, sess *engine.Session) ([]engine.Event, int64, *engine.Page, error) {
	peek, events, err := frontend.Peek(ctx, sess, func(events []engine.Event) bool {
		_, ok := lastResponse(events)
		return ok
	})
	if peek == nil {
		return nil, 0, nil, err
	}
	response, _ := lastResponse(events)
	return response, response[len(response)-1].Seq, peek, nil
}

// lastResponse returns the events from the last user message on, and false
// when there is none among them.
func lastResponse(events []engine.Event) ([]engine.Event, bool) {
	for i, ev := range slices.Backward(events) {
		if ev.Type == engine.EventMessage && isUserMessage(ev.Frame) {
			return events[i:], true
		}
	}
	return nil, false
}

// inProgress says whether a response is still in progress: no
// session.idle (or end) came after its user message.
func inProgress(response []engine.Event) bool {
	for _, ev := range response {
		if ev.Type == engine.EventSessionIdle || ev.Type == engine.EventSessionEnded {
			return false
		}
	}
	return true
}

// isUserMessage says whether a message event is the user's, not a
// sub-agent's task (which has a parent).
func isUserMessage(frame json.RawMessage) bool {
	var ev struct {
		Parent  string `json:"parent"`
		Message struct {
			Role string `json:"role"`
		} `json:"message"`
	}
	return json.Unmarshal(frame, &ev) == nil && ev.Message.Role == "user" && ev.Parent == ""
}
