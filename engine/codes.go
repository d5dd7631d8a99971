package engine

import "github.com/clienttools/gateway/engine/model"

// The wire codes, declared once. docs/protocol.md lists every one of them
// and static/codes.js copies them for the browser; tests hold both to these
// tables, so a code is added here first.

// WireCode is the code of an `error` frame or event. Without a seq it says
// why the gateway refused a frame the page sent (the connection and the
// session stay up); with a seq it is a problem the session hit.
type WireCode string

// Codes of error frames: the gateway could not take a frame the page sent.
const (
	WireBadFrame       WireCode = "bad_frame"          // not JSON, not an object, a missing or mistyped field
	WireUnknownFrame   WireCode = "unknown_frame"      // a type the browser may not send
	WireNotOpen        WireCode = "not_open"           // a frame before session.open
	WireAlreadyOpen    WireCode = "already_open"       // a second session.open on one connection
	WireUnknownSession WireCode = "unknown_session"    // no such session for this browser
	WireUnknownCall    WireCode = "unknown_call"       // an answer for a call the session never had
	WireStaleAttempt   WireCode = "stale_attempt"      // an answer for an attempt that is no longer current
	WireSettled        WireCode = "settled"            // a repeat of the answer that settled the call
	WireSessionClosed  WireCode = "session_closed"     // the session has ended
	WireRateLimited    WireCode = "rate_limited"       // too many refused frames: reading slows down
	WireLimitExceeded  WireCode = "limit_exceeded"     // a frame asks for more than a documented limit
	WireStoreFailed    WireCode = "store_unavailable"  // the session store fails: no new turn until it recovers
	WireUnreadable     WireCode = "session_unreadable" // the session's journal cannot be read back: it cannot be opened
	WireInternal       WireCode = "internal"           // a bug in the gateway
)

// Codes of error events (with seq), and of error frames when a new session
// cannot start.
const (
	WireWorkerFailed WireCode = "worker_failed" // the worker returned an error or panicked
	WireModelFailed  WireCode = "model_failed"  // the model provider failed
	WireBadDecision  WireCode = "bad_decision"  // the worker's decision could not be carried out
	WireBadConfig    WireCode = "bad_config"    // the agent config cannot be used
)

// ErrorCode classifies a tool error.
type ErrorCode string

// Error codes carried by tool.error and the browser's error frames.
const (
	CodeInvalidInput      ErrorCode = "invalid_input"
	CodeMalformedInput    ErrorCode = "malformed_input"
	CodeUnknownTool       ErrorCode = "unknown_tool"
	CodeInvalidOutput     ErrorCode = "invalid_output"
	CodeTimeout           ErrorCode = "timeout"
	CodeCancelled         ErrorCode = "cancelled"
	CodeClientUnavailable ErrorCode = "client_unavailable"
	CodeToolFailed        ErrorCode = "tool_failed"
	CodeInternal          ErrorCode = "internal"
	CodeInterrupted       ErrorCode = "interrupted"
	CodeOutcomeUnknown    ErrorCode = "outcome_unknown"
	CodeDenied            ErrorCode = "denied"
	// The sub-agent a call was delegated to failed, or could not start.
	CodeSubagentFailed ErrorCode = "subagent_failed"
)

// CloseCode is a WebSocket close status the gateway sends. Ours are in
// 4000-4999; the others are the protocol's own (RFC 6455).
type CloseCode int

// Close codes.
const (
	CloseNormal       CloseCode = 1000 // the session ended
	CloseGoingAway    CloseCode = 1001 // the gateway is shutting down
	CloseTooSlow      CloseCode = 1008 // the page could not keep up: reconnect and resume
	CloseTooBig       CloseCode = 1009 // a frame was over the read limit
	CloseUnresponsive CloseCode = 4000 // the page did not answer pings in time
	CloseElsewhere    CloseCode = 4001 // the session runs on another gateway node
	CloseTooMany      CloseCode = 4002 // the browser has as many sockets open as it may
	CloseForbidden    CloseCode = 4003 // the page's origin may not use this gateway
)

// Code describes one wire code: its value and when it is sent.
type Code[T comparable] struct {
	Value T
	Name  string // the SDK's constant name (static/codes.js)
	When  string
}

// FrameErrors are the codes of error frames without a seq.
var FrameErrors = []Code[WireCode]{
	{WireBadFrame, "BAD_FRAME", "the frame is not JSON, not an object, or has a missing or mistyped field"},
	{WireUnknownFrame, "UNKNOWN_FRAME", "the frame's type is not one the browser may send"},
	{WireNotOpen, "NOT_OPEN", "a frame came before session.open"},
	{WireAlreadyOpen, "ALREADY_OPEN", "a second session.open on one connection"},
	{WireUnknownSession, "UNKNOWN_SESSION", "no such session for this browser: it ended, or it is another browser's"},
	{WireUnknownCall, "UNKNOWN_CALL", "an answer names a call the session does not have, or a worker's call"},
	{WireStaleAttempt, "STALE_ATTEMPT", "an answer for an attempt that is no longer current; it never counts"},
	{WireSettled, "SETTLED", "a repeat of the answer that settled the call"},
	{WireSessionClosed, "SESSION_CLOSED", "the session has ended"},
	{WireRateLimited, "RATE_LIMITED", "the page sent too many refused frames: the gateway reads its frames more slowly"},
	{WireLimitExceeded, "LIMIT_EXCEEDED", "the frame asks for more than a documented limit (tools declared, a tool name's length, a browser's sessions in memory)"},
	{WireStoreFailed, "STORE_UNAVAILABLE", "the session store fails (a full disk, the store unreachable): the message was not taken, and none is until the store recovers"},
	{WireUnreadable, "SESSION_UNREADABLE", "the session's stored journal cannot be read back (damaged, or written by a later gateway version): it cannot be opened; the SDK starts a new one"},
	{WireBadConfig, "BAD_CONFIG", "a new session cannot start: the worker's agent config cannot be used"},
	{WireWorkerFailed, "WORKER_FAILED", "a new session cannot start: the worker failed on session.start"},
	{WireInternal, "INTERNAL", "the gateway failed on this frame (a bug)"},
}

// SessionErrors are the codes of error events (with seq).
var SessionErrors = []Code[WireCode]{
	{WireWorkerFailed, "WORKER_FAILED", "the worker returned an error or panicked"},
	{WireModelFailed, "MODEL_FAILED", "the model provider failed; the turn's text so far is kept"},
	{WireBadDecision, "BAD_DECISION", "an action of the worker's decision could not be carried out"},
	{WireBadConfig, "BAD_CONFIG", "the worker's new agent config cannot be used; the old one stays"},
}

// ToolErrors are the codes of a failed call (tool.finished, tool.retrying,
// tool.error).
var ToolErrors = []Code[ErrorCode]{
	{CodeInvalidInput, "INVALID_INPUT", "the arguments violate the tool's input schema"},
	{CodeMalformedInput, "MALFORMED_INPUT", "the arguments are not a JSON object"},
	{CodeUnknownTool, "UNKNOWN_TOOL", "the model named a tool that is not declared"},
	{CodeInvalidOutput, "INVALID_OUTPUT", "the result violates the tool's output schema"},
	{CodeTimeout, "TIMEOUT", "no answer before the attempt's deadline"},
	{CodeCancelled, "CANCELLED", "the user stopped the turn, or the session ended"},
	{CodeClientUnavailable, "CLIENT_UNAVAILABLE", "no page of the session provides the client tool"},
	{CodeToolFailed, "TOOL_FAILED", "the tool failed"},
	{CodeInternal, "INTERNAL", "the call could not start (a bad retry policy) or the gateway failed"},
	{CodeDenied, "DENIED", "the user denied the call (its tool asks for approval): it did not run"},
	{CodeOutcomeUnknown, "OUTCOME_UNKNOWN", "a tool declared idempotent: false got the attempt and did not answer (it timed out, or its page left): it was not tried again, and whether it took effect is unknown"},
	{CodeInterrupted, "INTERRUPTED", "a worker attempt was running when the gateway restarted and its tool is not idempotent: whether it took effect is unknown"},
	{CodeSubagentFailed, "SUBAGENT_FAILED", "the sub-agent the call was delegated to failed (its model failed, a guard stopped it, it gave no answer) or could not start (its agent config, the depth or fan-out limit)"},
}

// Known reports whether c is one of the tool error codes (ToolErrors). A
// page's tool.error with another code is refused: a page is not trusted to
// name the codes pages and metrics carry. A worker's may be its own.
func (c ErrorCode) Known() bool {
	for _, k := range ToolErrors {
		if k.Value == c {
			return true
		}
	}
	return false
}

// Closes are the WebSocket close codes the gateway sends.
var Closes = []Code[CloseCode]{
	{CloseNormal, "NORMAL", "the session ended"},
	{CloseGoingAway, "GOING_AWAY", "the gateway is shutting down"},
	{CloseTooSlow, "TOO_SLOW", "the page could not keep up with its session's events, or frames between two gateway nodes of a cluster were lost: reconnect and resume with after"},
	{CloseTooBig, "TOO_BIG", "a frame was larger than the read limit"},
	{CloseUnresponsive, "UNRESPONSIVE", "the page did not answer pings in time; a client call it ran moves to another page"},
	{CloseElsewhere, "ELSEWHERE", "the session runs on another gateway node of a cluster: reconnect (a load balancer may reach it) and resume"},
	{CloseTooMany, "TOO_MANY", "the browser already has as many sockets open as it may (--max-sockets): close another page first"},
	{CloseForbidden, "FORBIDDEN", "the page's origin may not use this gateway (--origins): the reason names it, and reconnecting will not change it"},
}

// StopReasons are why a model turn ended (model.finished's stopReason).
var StopReasons = []Code[string]{
	{model.StopEndTurn, "END_TURN", "the model finished its reply"},
	{model.StopToolUse, "TOOL_USE", "the model asked for tool calls; their results prompt it again"},
	{model.StopMaxTokens, "MAX_TOKENS", "the reply reached its token limit (the agent's maxTokens); a tool call it cut does not run"},
	{model.StopRefusal, "REFUSAL", "the model declined to answer; its words, if any, are the reply"},
	{model.StopContentFilter, "CONTENT_FILTER", "the provider's content filter ended the reply"},
	{model.StopError, "ERROR", "the model failed (model.finished's error says how); the text so far is kept"},
	{model.StopCancelled, "CANCELLED", "the user stopped the turn, or the session ended"},
}

// CancelReasons are why an attempt is aborted (tool.cancel's reason): the
// tool error codes the attempt's end is said with.
var CancelReasons = []Code[CancelReason]{
	{CancelTimeout, "TIMEOUT", "the attempt's deadline passed; another attempt may follow"},
	{CancelCancelled, "CANCELLED", "the user stopped the turn, the session ended, or the call a sub-agent answers ended"},
}

// Guards are the limits that stop an agent (guard.tripped's guard).
var Guards = []Code[string]{
	{GuardModelTurns, "MODEL_TURNS", "the model took the most turns one user message may have"},
	{GuardRepeats, "REPEATS", "the model asked for the same tool with the same arguments the most times one user message may"},
	{GuardMessageTokens, "MESSAGE_TOKENS", "answering one user message used its token budget"},
	{GuardSessionTokens, "SESSION_TOKENS", "the session used its token budget"},
}
