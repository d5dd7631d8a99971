package engine

import (
	"encoding/json"
	"strconv"
	"time"
)

// Event types sent to the browser. Every one but the page's own frames
// (session.opened, the deliveries tool.call and tool.cancel, and error for a
// frame the gateway refused) is a session event: it has the next seq and is
// replayed to a page that resumes with after.
const (
	EventMessage        = "message"
	EventModelDelta     = "model.delta"
	EventModelFinished  = "model.finished"
	EventModelDiscarded = "model.discarded"
	EventModelRetrying  = "model.retrying"
	EventToolStarted    = "tool.started"
	EventToolLeased     = "tool.leased"
	EventToolRetrying   = "tool.retrying"
	EventToolFinished   = "tool.finished"
	EventSessionIdle    = "session.idle"
	EventClientEvent    = "client.event"
	EventError          = "error"
	EventSessionEnded   = "session.ended"
	EventGuardTripped   = "guard.tripped"

	// The first frame of a page's stream, without seq.
	FrameSessionOpened = "session.opened"
	// Deliveries to the one page that runs an attempt, without seq.
	FrameToolCall   = TypeToolCall // the action, as the browser runs it
	FrameToolCancel = "tool.cancel"
	// The delivery to the page that sent a message with an id: the
	// session has it (MessageTakenFrame).
	FrameMessageTaken = "message.taken"
)

// Event is one frame of a page's stream, encoded once as the exact JSON the
// browser receives ({"type":..., "seq":..., fields}) and shared by every page
// and the store. Session events have Seq 1, 2, ...; a page's own frames
// (session.opened, tool.call, tool.cancel) have Seq 0.
type Event struct {
	Seq   int64
	Type  string
	Frame json.RawMessage
}

// MessageEvent: a message joined the transcript.
type MessageEvent struct {
	Message Message `json:"message"`
}

// ModelDeltaEvent: a piece of the model's text, as it streams.
type ModelDeltaEvent struct {
	Text string `json:"text"`
}

// ModelFinishedEvent: the model's turn ended.
type ModelFinishedEvent struct {
	StopReason string `json:"stopReason,omitempty"`
	Usage      Usage  `json:"usage"`
	Error      string `json:"error,omitempty"`
}

// ModelDiscardedEvent: the text the model streamed since the last
// model.finished will never finish (the gateway restarted mid-turn): pages
// drop it, and the turn runs again.
type ModelDiscardedEvent struct {
	Reason string `json:"reason"`
}

// ModelRetryingEvent: the model's request failed before any of the turn's
// text was shown (an overload, a rate limit, a connection that failed),
// and is sent again after Backoff. Error is the failure as model.finished
// would have said it.
type ModelRetryingEvent struct {
	Attempt  int    `json:"attempt"` // the attempt that failed
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	Backoff  string `json:"backoff"`
}

// ToolStartedEvent: an attempt of a call started, on either handler.
type ToolStartedEvent struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Input     ToolInput `json:"input"`
	Handler   Handler   `json:"handler"`
	Attempt   int       `json:"attempt"`
	Attempts  int       `json:"attempts"`
	Deadline  string    `json:"deadline"`
	// Page is the page that runs a client attempt; empty for a worker
	// attempt, and for a client attempt that waits for a page.
	Page string `json:"page,omitempty"`
}

// ToolLeasedEvent: the page that runs a client call's current attempt
// changed after its tool.started: its page left (closed, or stopped
// answering pings) and another took the attempt, same deadline, or a page
// arrived for an attempt that was waiting. Page is empty when the attempt
// now waits for a page.
type ToolLeasedEvent struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	Page    string `json:"page,omitempty"`
}

// ToolRetryingEvent: an attempt failed or timed out and another follows
// after Backoff.
type ToolRetryingEvent struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Attempt  int       `json:"attempt"` // the attempt that failed
	Attempts int       `json:"attempts"`
	Error    string    `json:"error"`
	Code     ErrorCode `json:"code,omitempty"`
	Backoff  string    `json:"backoff"`
}

// ToolFinishedEvent: a call settled, once, after any retries. It carries the
// tool.finished trigger's fields and, for a failure, the error's structured
// Code and Detail, which the trigger (as the protocol types it) has no room for.
type ToolFinishedEvent struct {
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Name   string          `json:"name"`
	Result string          `json:"result,omitempty"` // given whenever OK: "" is a result
	Error  string          `json:"error,omitempty"`
	Code   ErrorCode       `json:"code,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// MarshalJSON gives result whenever the call settled ok, "" included: a
// page reads an empty result, not a result left out.
func (e ToolFinishedEvent) MarshalJSON() ([]byte, error) {
	if e.OK {
		type settledOK struct {
			ID     string          `json:"id"`
			OK     bool            `json:"ok"`
			Name   string          `json:"name"`
			Result string          `json:"result"`
			Error  string          `json:"error,omitempty"`
			Code   ErrorCode       `json:"code,omitempty"`
			Detail json.RawMessage `json:"detail,omitempty"`
		}
		return Marshal(settledOK(e))
	}
	type plain ToolFinishedEvent
	return Marshal(plain(e))
}

// ErrorEvent: something went wrong in the session (the worker, the model);
// the session stays up. The gateway sends the same frame, without seq, for
// a frame it could not take.
type ErrorEvent struct {
	Code    WireCode `json:"code"`
	Message string   `json:"message"`
	// ID is the refused message's id, in the gateway's reply to a message
	// frame that had one: the page sends it no more.
	ID string `json:"id,omitempty"`
}

// SessionEndedEvent: the session closed and takes no more input.
type SessionEndedEvent struct {
	Reason string `json:"reason,omitempty"`
}

// SessionOpenedFrame answers session.open: the session, the seq the replay
// that follows ends with, and the page's id.
type SessionOpenedFrame struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Page    string `json:"page"`
	// Epoch names the session's run in memory that sent it: a page
	// resuming says it (session.open's epoch).
	Epoch string `json:"epoch,omitempty"`
	// Now is the session's clock as it sent the frame (RFC 3339, UTC, to
	// the millisecond): the clock its deadlines are on, so a page whose
	// own is off can read them as the gateway means them.
	Now    string      `json:"now,omitempty"`
	Limits *PageLimits `json:"limits,omitempty"`
}

// PageLimits are the bounds on what a page sends, so it can refuse a frame
// over them itself, with a clear error, instead of losing it.
type PageLimits struct {
	// FrameBytes is the largest frame, in bytes, the page may send; absent
	// when the transport has no limit of its own.
	FrameBytes int64 `json:"frameBytes,omitempty"`
	// MessageBytes is the longest user message, in bytes of UTF-8.
	MessageBytes int `json:"messageBytes"`
}

// ClientCall is a client-handled attempt, as delivered to the page that runs
// it in a tool.call frame.
type ClientCall struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Input     ToolInput `json:"input"`
	Attempt   int       `json:"attempt"`
	Attempts  int       `json:"attempts"`
	Deadline  string    `json:"deadline"`
	// Proposed is the ready-made tool.error when Input is invalid or malformed.
	Proposed *ToolError `json:"proposed,omitempty"`
	// Parent is the call whose sub-agent made this call; empty for the
	// session's own agent's (docs/subagents.md).
	Parent string `json:"parent,omitempty"`
}

// CancelReason says why an attempt is aborted.
type CancelReason string

// Why tool.cancel is sent.
const (
	CancelTimeout   = CancelReason(CodeTimeout)   // the attempt's deadline passed
	CancelCancelled = CancelReason(CodeCancelled) // the user stopped the turn, or the session ended
)

// ClientEventEvent: a free-form event the worker pushed (a client.event
// action, without its action "type").
type ClientEventEvent struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

// ToolCancelFrame is the tool.cancel frame: abort that attempt.
type ToolCancelFrame struct {
	ID      string       `json:"id"`
	Attempt int          `json:"attempt"`
	Reason  CancelReason `json:"reason"`
}

// encodeEvent builds the frame {"type":typ,"seq":seq,"parent":parent,
// ...payload}, parent only when a sub-agent published it. The payload is
// encoded once, into a pooled buffer (see withJSON), for every page the
// event goes to.
func encodeEvent(typ string, seq int64, parent string, payload any) (json.RawMessage, error) {
	var frame []byte
	err := withJSON(payload, func(body []byte) {
		b := make([]byte, 0, len(body)+len(typ)+len(parent)+40)
		b = append(b, `{"type":`...)
		b = AppendJSONString(b, typ)
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, seq, 10)
		if parent != "" {
			b = append(b, `,"parent":`...)
			b = AppendJSONString(b, parent)
		}
		frame = appendMembers(b, body)
	})
	return frame, err
}

// FormatDeadline writes a deadline as RFC 3339 in UTC with milliseconds, as
// tool.execute, tool.call and the HTTP worker's deadline header carry it.
func FormatDeadline(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
