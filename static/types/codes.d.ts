// Declarations of codes.js: every code the gateway puts on the wire, as
// frozen tables NAME: value. docs/protocol.md says what each one means; the
// Go tests hold codes.js (and so these values) to the server's own lists.

export declare const CLOSE: Readonly<{
    NORMAL: 1000;
    GOING_AWAY: 1001;
    TOO_SLOW: 1008;
    TOO_BIG: 1009;
    UNRESPONSIVE: 4000;
    ELSEWHERE: 4001;
    TOO_MANY: 4002;
    FORBIDDEN: 4003;
}>;

export declare const FRAME_ERROR: Readonly<{
    BAD_FRAME: "bad_frame";
    UNKNOWN_FRAME: "unknown_frame";
    NOT_OPEN: "not_open";
    ALREADY_OPEN: "already_open";
    UNKNOWN_SESSION: "unknown_session";
    UNKNOWN_CALL: "unknown_call";
    STALE_ATTEMPT: "stale_attempt";
    SETTLED: "settled";
    SESSION_CLOSED: "session_closed";
    RATE_LIMITED: "rate_limited";
    LIMIT_EXCEEDED: "limit_exceeded";
    STORE_UNAVAILABLE: "store_unavailable";
    SESSION_UNREADABLE: "session_unreadable";
    BAD_CONFIG: "bad_config";
    WORKER_FAILED: "worker_failed";
    INTERNAL: "internal";
}>;

export declare const SESSION_ERROR: Readonly<{
    WORKER_FAILED: "worker_failed";
    MODEL_FAILED: "model_failed";
    BAD_DECISION: "bad_decision";
    BAD_CONFIG: "bad_config";
}>;

export declare const TOOL_ERROR: Readonly<{
    INVALID_INPUT: "invalid_input";
    MALFORMED_INPUT: "malformed_input";
    UNKNOWN_TOOL: "unknown_tool";
    INVALID_OUTPUT: "invalid_output";
    TIMEOUT: "timeout";
    CANCELLED: "cancelled";
    CLIENT_UNAVAILABLE: "client_unavailable";
    TOOL_FAILED: "tool_failed";
    INTERNAL: "internal";
    DENIED: "denied";
    OUTCOME_UNKNOWN: "outcome_unknown";
    INTERRUPTED: "interrupted";
    SUBAGENT_FAILED: "subagent_failed";
}>;

export declare const CANCEL_REASON: Readonly<{
    TIMEOUT: "timeout";
    CANCELLED: "cancelled";
}>;

export declare const STOP_REASON: Readonly<{
    END_TURN: "end_turn";
    TOOL_USE: "tool_use";
    MAX_TOKENS: "max_tokens";
    REFUSAL: "refusal";
    CONTENT_FILTER: "content_filter";
    ERROR: "error";
    CANCELLED: "cancelled";
}>;

export declare const GUARD: Readonly<{
    MODEL_TURNS: "model_turns";
    REPEATS: "repeats";
    MESSAGE_TOKENS: "message_tokens";
    SESSION_TOKENS: "session_tokens";
}>;

/** A close code of CLOSE. */
export type CloseCode = (typeof CLOSE)[keyof typeof CLOSE];
/** A code of FRAME_ERROR: an `error` frame without seq. */
export type FrameErrorCode = (typeof FRAME_ERROR)[keyof typeof FRAME_ERROR];
/** A code of SESSION_ERROR: the `error` session event. */
export type SessionErrorCode = (typeof SESSION_ERROR)[keyof typeof SESSION_ERROR];
/** A code of TOOL_ERROR: a failed tool call. */
export type ToolErrorCode = (typeof TOOL_ERROR)[keyof typeof TOOL_ERROR];
/** A reason of CANCEL_REASON: why tool.cancel aborts an attempt. */
export type CancelReason = (typeof CANCEL_REASON)[keyof typeof CANCEL_REASON];
/** A reason of STOP_REASON: why a model turn ended. */
export type StopReason = (typeof STOP_REASON)[keyof typeof STOP_REASON];
/** A guard of GUARD: the limit that stopped an agent. */
export type GuardName = (typeof GUARD)[keyof typeof GUARD];
