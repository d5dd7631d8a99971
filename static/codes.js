/**
 * codes.js: every code the gateway puts on the wire, in one place.
 *
 * The SDK's other modules compare against these tables instead of writing a
 * code out, and a page may use them too (gateway.js re-exports them), e.g.
 * `new ToolError("...", { code: TOOL_ERROR.TOOL_FAILED })`.
 *
 * Exports (frozen objects, NAME: wire value):
 * - CLOSE: the WebSocket close codes the gateway closes a connection with.
 * - FRAME_ERROR: the codes of `error` frames without seq (a frame of this
 *   page's that the gateway refused, or a session it could not open).
 * - SESSION_ERROR: the codes of the `error` session event (with seq).
 * - TOOL_ERROR: the codes of a failed tool call (`tool.error`,
 *   `tool.retrying`, `tool.finished`).
 * - CANCEL_REASON: `tool.cancel`'s reason (the same words as TOOL_ERROR's
 *   TIMEOUT and CANCELLED).
 * - STOP_REASON: why a model turn ended (`model.finished`'s `stopReason`).
 * - GUARD: the limits that stop an agent (`guard.tripped`'s `guard`).
 *
 * The gateway's Go tests parse this file to check it against the server's
 * own lists, so keep its shape: one frozen table per statement, one
 * `KEY: value,` per line, an optional line comment after it.
 *
 * @module codes
 */

export const CLOSE = Object.freeze({
    NORMAL: 1000,        // the session ended, or the page closed
    GOING_AWAY: 1001,    // the gateway is shutting down
    TOO_SLOW: 1008,      // the page could not keep up: reconnect and resume
    TOO_BIG: 1009,       // a frame was over the read limit
    UNRESPONSIVE: 4000,  // the page did not answer pings in time
    ELSEWHERE: 4001,     // the session runs on another gateway node: reconnect and resume
    TOO_MANY: 4002,      // this browser has as many sockets open as it may: close another page
    FORBIDDEN: 4003,     // this page's origin may not use the gateway: the SDK does not reconnect
});

export const FRAME_ERROR = Object.freeze({
    BAD_FRAME: "bad_frame",              // not JSON, not an object, a missing or mistyped field
    UNKNOWN_FRAME: "unknown_frame",      // a type the browser may not send
    NOT_OPEN: "not_open",                // a frame before session.open
    ALREADY_OPEN: "already_open",        // a second session.open on one connection
    UNKNOWN_SESSION: "unknown_session",  // no such session for this browser: the SDK starts a new one
    UNKNOWN_CALL: "unknown_call",        // an answer for a call the session never had
    STALE_ATTEMPT: "stale_attempt",      // an answer for an attempt that is no longer current
    SETTLED: "settled",                  // a repeat of the answer that settled the call
    SESSION_CLOSED: "session_closed",    // the session has ended
    RATE_LIMITED: "rate_limited",        // too many refused frames: the gateway reads this page more slowly
    LIMIT_EXCEEDED: "limit_exceeded",    // more than a documented limit (tools declared, the length of a name or a message)
    STORE_UNAVAILABLE: "store_unavailable", // the session store fails: the message was not taken
    SESSION_UNREADABLE: "session_unreadable", // the session's stored journal cannot be read: the SDK starts a new one
    BAD_CONFIG: "bad_config",            // a new session cannot start: the agent config cannot be used
    WORKER_FAILED: "worker_failed",      // a new session cannot start: the worker failed
    INTERNAL: "internal",                // the gateway failed on the frame (a bug)
});

export const SESSION_ERROR = Object.freeze({
    WORKER_FAILED: "worker_failed",  // the worker returned an error or panicked
    MODEL_FAILED: "model_failed",    // the model provider failed
    BAD_DECISION: "bad_decision",    // the decision of the worker could not be carried out
    BAD_CONFIG: "bad_config",        // the new agent config of the worker cannot be used; the old one stays
});

export const TOOL_ERROR = Object.freeze({
    INVALID_INPUT: "invalid_input",            // the arguments break the input schema of the tool
    MALFORMED_INPUT: "malformed_input",        // the arguments are not JSON
    UNKNOWN_TOOL: "unknown_tool",              // no such tool (here: the page does not declare it)
    INVALID_OUTPUT: "invalid_output",          // the result breaks the output schema of the tool
    TIMEOUT: "timeout",                        // the deadline of the attempt passed
    CANCELLED: "cancelled",                    // Stop, or the session ended
    CLIENT_UNAVAILABLE: "client_unavailable",  // no page of the session provides the client tool
    TOOL_FAILED: "tool_failed",                // the tool threw, or its result is not JSON
    INTERNAL: "internal",                      // the call could not start, or the gateway failed
    DENIED: "denied",                          // the user denied a call whose tool asks for approval
    OUTCOME_UNKNOWN: "outcome_unknown",        // a tool declared idempotent: false got the attempt, then timed out or lost its page; not retried
    INTERRUPTED: "interrupted",                // a worker attempt cut by a restart; its outcome is unknown
    SUBAGENT_FAILED: "subagent_failed",        // the sub-agent the call was delegated to failed, or could not start
});

export const CANCEL_REASON = Object.freeze({
    TIMEOUT: "timeout",      // the deadline of the attempt passed; another attempt may follow
    CANCELLED: "cancelled",  // Stop, the session ended, or the call a sub-agent answers ended
});

export const STOP_REASON = Object.freeze({
    END_TURN: "end_turn",              // the model finished its reply
    TOOL_USE: "tool_use",              // the model asked for tool calls
    MAX_TOKENS: "max_tokens",          // the reply reached its token limit
    REFUSAL: "refusal",                // the model declined to answer
    CONTENT_FILTER: "content_filter",  // the content filter of the provider ended the reply
    ERROR: "error",                    // the model failed (model.finished's error says how)
    CANCELLED: "cancelled",            // Stop, or the session ended
});

export const GUARD = Object.freeze({
    MODEL_TURNS: "model_turns",        // the most model turns one user message may have
    REPEATS: "repeats",                // the same tool with the same arguments, asked for too often
    MESSAGE_TOKENS: "message_tokens",  // answering one message used its token budget
    SESSION_TOKENS: "session_tokens",  // the session used its token budget
});
