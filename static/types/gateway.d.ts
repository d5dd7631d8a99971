// Declarations of gateway.js, the browser SDK's entry point: its public API
// as docs/sdk.md describes it. The JS modules beside this folder are the
// implementation (the same files the gateway serves under /static/);
// `make types` checks that they conform to these declarations and that a
// typed consumer compiles against them.

import type { CancelReason, CloseCode, FrameErrorCode, GuardName, SessionErrorCode, StopReason, ToolErrorCode } from "./codes.js";

export { CLOSE, FRAME_ERROR, SESSION_ERROR, TOOL_ERROR, CANCEL_REASON, STOP_REASON, GUARD } from "./codes.js";
export type { CancelReason, CloseCode, FrameErrorCode, GuardName, SessionErrorCode, StopReason, ToolErrorCode } from "./codes.js";

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A frame on the wire (docs/protocol.md): session events carry `seq`. */
export interface Frame {
    type: string;
    seq?: number;
    [field: string]: any;
}

/** The engine's classification of a call's raw arguments. */
export type ToolInput =
    | { status: "valid"; value: any }
    | { status: "invalid"; value: any; error: string }
    | { status: "malformed"; error: string };

/** A `tool.error` answer, as sent (or as a delivery's `proposed` answer). */
export interface ToolErrorFrame {
    type: "tool.error";
    id: string;
    attempt: number;
    /** Written for the model to read. */
    error: string;
    /** Ask for another attempt, under the call's retry policy. */
    retryable?: boolean;
    /** One of TOOL_ERROR when a page sends it: the gateway refuses another (bad_frame). */
    code?: ToolErrorCode | (string & {});
    detail?: any;
}

/** A `tool.call` delivery: run this client tool. */
export interface ToolCallFrame {
    type: "tool.call";
    id: string;
    name: string;
    /** The raw argument string the model wrote. */
    arguments: string;
    input: ToolInput;
    /** This attempt, from 1. */
    attempt: number;
    /** The call's total attempts under its retry policy. */
    attempts: number;
    /** RFC 3339: when this attempt times out. */
    deadline: string;
    /** The ready-made answer when input is not valid. */
    proposed?: ToolErrorFrame;
    /** Set when a sub-agent made the call: the id of the call it answers (docs/subagents.md). */
    parent?: string;
}

/** What a tool's run gets besides its input. */
export interface ToolContext {
    /** Aborts on tool.cancel (timeout, Stop), a later attempt, the call's settling, close(). */
    signal: AbortSignal;
    attempt: number;
    attempts: number;
    /** When the gateway times this attempt out, on this page's clock (the gateway's deadline less clockSkew): each progress report it took moves it. */
    readonly deadline: Date | null;
    /** The delivery itself. */
    call: ToolCallFrame;
    /** Still working: sends tool.progress, which moves the attempt's deadline. */
    progress(p?: { progress?: number; total?: number; message?: string }): void;
}

/** A client tool: what `run` returns (or resolves to) is the result, any JSON value. */
export interface Tool<I = any, R = unknown> {
    run(input: I, ctx: ToolContext): R | Promise<R>;
    /** Run even when input is `invalid` or `malformed`; default false. */
    acceptInvalid?: boolean;
}

export type ConnectionState = "connecting" | "open" | "closed";

/** Backoff between reconnects, in ms. */
export interface ReconnectOptions {
    /** Default 250. */
    initialDelay?: number;
    /** Default 10000. */
    maxDelay?: number;
    /** Default 2. */
    factor?: number;
}

/** Where the session is kept across reloads: a Storage or anything with these three. */
export type StorageLike = Pick<Storage, "getItem" | "setItem" | "removeItem">;

export interface ConnectOptions {
    /** WebSocket URL; default `/ws` on this page's host. http(s) and relative URLs become ws(s). */
    url?: string;
    /** The client tools this page runs, by name: a Tool or a plain run function. */
    tools?: Record<string, Tool | Tool["run"]>;
    /** Default sessionStorage (per tab); null: nowhere. */
    storage?: StorageLike | null;
    /** Default "gateway.session". */
    storageKey?: string;
    /** false: never reconnect. */
    reconnect?: ReconnectOptions | false;
    /**
     * How long, in ms, a message, a tool's answer, an approval or a Stop while a turn
     * runs may go without any frame from the gateway before the socket is taken for dead
     * (a network path that dropped without closing it) and reconnected; default 15000.
     * A session.open may go at least 65000 (its answer may wait for the worker's
     * decision). false: never.
     */
    answerTimeout?: number | false;
    /** The WebSocket class: a fake in tests, or another runtime's. */
    WebSocket?: typeof WebSocket;
}

/** The gateway's limits, in bytes; frameBytes is Infinity when its transport has none. */
export interface Limits {
    frameBytes: number;
    messageBytes: number;
}

export type ToolStatus = "pending" | "running" | "retrying" | "done" | "error";
export type ToolWhere = "here" | "elsewhere" | "waiting";

/** A failed attempt, as tool.retrying reported it. */
export interface ToolAttempt {
    attempt: number;
    error: string;
    code?: string;
    backoff?: string;
}

/** Why the SDK dropped its session (the reset event). docs/sdk.md#events. */
export type ResetReason = "reset" | "open" | "unknown_session" | "session_unreadable" | "new_session";

/** Everything known about one tool call (the `tool` event). docs/sdk.md#tool-cards. */
export interface ToolCard {
    id: string;
    name: string;
    arguments: string;
    input: ToolInput | null;
    handler: "worker" | "client" | null;
    status: ToolStatus;
    attempt: number;
    attempts: number;
    deadline: string | null;
    backoff: string | null;
    failures: ToolAttempt[];
    page: string | null;
    where: ToolWhere | null;
    approval: { digest: string; deadline: string | null } | null;
    /** While approval is set: answers it (tool.approve); false when not sent. */
    approve?: (approved: boolean) => boolean;
    approved?: boolean;
    progress: { progress?: number; total?: number; message?: string } | null;
    /** Set when done: the result as text, what the model read. */
    result?: string;
    /** Set when done: result parsed as JSON when it is JSON, else the text. */
    value?: any;
    /** Set on error. */
    error?: string;
    /** Set on error: why it failed (TOOL_ERROR: "cancelled", "timeout", "denied", ...). */
    code?: string;
    local: boolean;
    localState: "running" | "answered" | "cancelled" | null;
    transcript: { content: string; isError: boolean } | null;
    replayed: boolean;
    /** The call whose sub-agent made this call; null: the session's own agent made it. */
    parent: string | null;
    /** Set when the worker delegated the call to a sub-agent (tool.delegated). */
    subagent: SubAgent | null;
}

/** The sub-agent answering a call's attempt (docs/subagents.md). */
export interface SubAgent {
    model: string;
    tools: string[];
    /** 1 under the session's own agent. */
    depth: number;
    /** The call's attempt it answers. */
    attempt: number;
    /** Its text, one string per model turn, as it streams. */
    turns: string[];
    /** turns joined by blank lines. */
    text: string;
    /** Its last error or guard message. */
    error: string | null;
}

/** A message of the transcript (the protocol's `message` event). */
export interface Message {
    role: "user" | "assistant" | "tool" | (string & {});
    content: string;
    [field: string]: any;
}

/** Each event's detail, by name: `client.on(name, (detail) => ...)`. */
export interface GatewayEvents {
    state: { state: ConnectionState; code?: number; reason?: string; retryIn?: number };
    opened: { session: string; seq: number; resumed: boolean; page: string | null };
    reset: { reason: ResetReason };
    message: { seq: number; message: Message; replayed: boolean };
    delta: { seq: number; text: string; replayed: boolean };
    "model.retrying": { seq: number; attempt: number; attempts: number; error: string; backoff: string; replayed: boolean };
    "model.finished": { seq: number; stopReason?: StopReason | (string & {}); usage?: any; error?: string; replayed: boolean };
    discarded: { seq: number; reason: string; replayed: boolean };
    tool: ToolCard;
    idle: { seq: number; replayed: boolean };
    guard: { seq: number; guard: GuardName | (string & {}); limit?: number; value?: number; tool?: string; message: string; replayed: boolean };
    "client.event": { seq: number; name: string; data: any; replayed: boolean };
    error: { code: FrameErrorCode | SessionErrorCode | (string & {}); message: string; seq?: number; replayed?: boolean; refused?: Frame; retrying?: boolean };
    ended: { seq: number; reason?: string; replayed: boolean };
    /** An event of a sub-agent (`event`, of type `type`), answering the call `parent`. */
    subagent: { seq: number; parent: string; type: string; event: Frame; replayed: boolean };
    frame: Frame;
    send: Frame;
}

/** Connects to the gateway and returns the client. Starts in a microtask. */
export declare function connect(options?: ConnectOptions): GatewayClient;

/** A connection to one session of the gateway, surviving reconnects. */
export declare class GatewayClient extends EventTarget {
    constructor(options?: ConnectOptions);
    /** The session id, once known. */
    get session(): string | null;
    /** This connection's page id, from session.opened. */
    get page(): string | null;
    /** The last session event's seq. */
    get seq(): number;
    get state(): ConnectionState;
    get limits(): Readonly<Limits>;
    /** ms the gateway's clock is ahead of this page's, from session.opened's `now` (0 before it): the gateway's time is Date.now() + clockSkew, the clock a card's deadline is on. */
    get clockSkew(): number;
    /** The names of the tools this page declares. */
    get tools(): string[];
    /** Every session event seen, deduplicated, in seq order (a copy). */
    get events(): Frame[];
    /** Every tool call seen, oldest first (copies). */
    get cards(): ToolCard[];
    /** Adds a listener of a documented event; returns the function that removes it. */
    on<K extends keyof GatewayEvents>(type: K, fn: (detail: GatewayEvents[K]) => void): () => void;
    /** Sends a user message; queued while the connection is down. @throws {LimitError} */
    send(content: string): void;
    /** Stops the current model turn and its open calls; offline, it goes once the page is back: before the messages queued offline when a turn was running, which it stops, else after them, stopping theirs. */
    cancel(): void;
    /** Closes for good and aborts this page's running tools; the stored session stays. */
    close(): void;
    /** Forgets the session and opens a new one ("New chat"). */
    reset(): void;
    /** Opens another of this browser's sessions from its start; null: a new one. */
    open(session: string | null): void;
}

/** An error a tool may throw to say more than its message. A code that is not TOOL_ERROR's throws a TypeError. */
export declare class ToolError extends Error {
    constructor(message: string, options?: { retryable?: boolean; code?: ToolErrorCode; detail?: any });
    retryable: boolean | undefined;
    code: ToolErrorCode | undefined;
    detail: any;
}

/** Something over the gateway's limits, never sent (send() throws it). */
export declare class LimitError extends Error {
    constructor(message: string, bytes: number, limit: number);
    /** FRAME_ERROR.LIMIT_EXCEEDED. */
    code: string;
    /** How large it is, in bytes. */
    bytes: number;
    /** The limit it is over, in bytes. */
    limit: number;
}
