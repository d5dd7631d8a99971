/**
 * gateway.js: the browser SDK of the client-tools gateway.
 *
 * One plain ES module, no build step. It opens the gateway's WebSocket
 * (`/ws`), opens or resumes a session, runs the client tools the model calls,
 * answers them, and turns the session's events into a few easy ones for a
 * chat UI. The wire protocol it speaks is docs/protocol.md; the API is
 * docs/sdk.md.
 *
 * @example
 * import { connect, ToolError } from "/static/gateway.js";
 *
 * const client = connect({
 *     tools: {
 *         get_local_time: {
 *             run: () => ({ time: new Date().toISOString() }),
 *         },
 *         confirm: {
 *             // A promise is fine; the signal aborts on tool.cancel.
 *             run: ({ question }, { signal }) => askTheUser(question, signal),
 *         },
 *         lookup: {
 *             run: async ({ key }) => {
 *                 const res = await fetch(`/api/${key}`);
 *                 // A thrown error becomes tool.error; retryable asks for another attempt.
 *                 if (!res.ok) throw new ToolError(`lookup failed: ${res.status}`, { retryable: true });
 *                 return res.json();
 *             },
 *         },
 *     },
 * });
 * client.on("delta", ({ text }) => appendToAnswer(text));
 * client.on("tool", (card) => renderToolCard(card));
 * client.on("state", ({ state }) => showConnection(state));
 * client.send("what time is it");
 *
 * Guarantees:
 * - The first frame on every connection is `session.open`. The session id,
 *   the last seq seen and the session's events are kept in sessionStorage, so
 *   a page reload shows the conversation again at once and resumes with
 *   `after` = the last seq (the gateway replays only what the page missed).
 * - Reconnects automatically with capped exponential backoff and jitter.
 * - Every session event is emitted once, in seq order, however often it is
 *   replayed.
 * - A delivered `tool.call` runs once per (id, attempt). A duplicate delivery
 *   of an attempt that already finished here resends its answer instead.
 *
 * Listeners added in the same task as connect() see every event: the client
 * starts (restores, then connects) in a microtask.
 *
 * @module gateway
 */

/**
 * @typedef {"connecting" | "open" | "closed"} ConnectionState
 *
 * @typedef {{ status: "valid", value: any }
 *     | { status: "invalid", value: any, error: string }
 *     | { status: "malformed", error: string }} ToolInput
 *     The engine's classification of a call's raw arguments.
 *
 * @typedef {object} ToolErrorFrame
 * @property {"tool.error"} type
 * @property {string} id
 * @property {number} attempt
 * @property {string} error        Written for the model to read.
 * @property {boolean} [retryable] Ask for another attempt (under the call's retry policy).
 * @property {string} [code]       One of the engine's error codes.
 * @property {any} [detail]
 *
 * @typedef {object} ToolCallFrame  A `tool.call` delivery: run this client tool.
 * @property {"tool.call"} type
 * @property {string} id
 * @property {string} name
 * @property {string} arguments     The raw argument string the model wrote.
 * @property {ToolInput} input
 * @property {number} attempt
 * @property {number} attempts
 * @property {string} deadline      RFC 3339: when this attempt times out.
 * @property {ToolErrorFrame} [proposed] The ready-made answer when input is not valid.
 *
 * @typedef {object} ToolContext
 * @property {AbortSignal} signal   Aborted on tool.cancel (timeout, Stop), when a
 *     later attempt of the call arrives, when the call settles elsewhere, and on close().
 * @property {number} attempt       This attempt, from 1.
 * @property {number} attempts      The call's total attempts.
 * @property {Date | null} deadline When the gateway times this attempt out.
 * @property {ToolCallFrame} call   The delivery itself.
 *
 * @typedef {object} Tool
 * @property {(input: any, ctx: ToolContext) => any} run
 *     Returns the result (any JSON value), or a promise of it. A throw or a
 *     rejection becomes `tool.error` with the error's message (and its
 *     `retryable`, `code`, `detail` when set, see ToolError).
 * @property {boolean} [acceptInvalid] Run even when input is `invalid` or
 *     `malformed` (`input` is then the value as parsed, or undefined). By
 *     default such a call is answered with the frame's `proposed` tool.error.
 *
 * @typedef {"pending" | "running" | "retrying" | "done" | "error"} ToolStatus
 *
 * @typedef {object} ToolAttempt  A failed attempt, as tool.retrying reported it.
 * @property {number} attempt
 * @property {string} error
 * @property {string} [code]
 * @property {string} [backoff]   The wait before the next attempt.
 *
 * @typedef {object} ToolCard  Everything known about one tool call.
 * @property {string} id
 * @property {string} name
 * @property {string} arguments   Raw argument string.
 * @property {ToolInput | null} input
 * @property {"worker" | "client" | null} handler
 * @property {ToolStatus} status
 *     pending: the model asked for it; running: an attempt is running;
 *     retrying: an attempt failed and `attempt` (the next) starts after `backoff`;
 *     done / error: settled (tool.finished).
 * @property {number} attempt     The current (or next, when retrying) attempt.
 * @property {number} attempts
 * @property {string | null} deadline
 * @property {string | null} backoff
 * @property {ToolAttempt[]} failures  Failed attempts, oldest first.
 * @property {string} [result]    Set when done.
 * @property {string} [error]     Set on error.
 * @property {boolean} local      This page was delivered the call.
 * @property {"running" | "answered" | "cancelled" | null} localState
 *     What this page's run of the current attempt did.
 * @property {{ content: string, isError: boolean } | null} transcript
 *     The tool message that joined the transcript: exactly what the model received.
 * @property {boolean} replayed
 *
 * @typedef {object} ConnectOptions
 * @property {string} [url]  WebSocket URL; default `/ws` on this page's host.
 *     http(s) and relative URLs are turned into ws(s).
 * @property {Record<string, Tool | Tool["run"]>} [tools]  The client tools this
 *     page can run, by name.
 * @property {Storage | null} [storage]  Where the session is kept across
 *     reloads; default sessionStorage (per tab). null: nowhere.
 * @property {string} [storageKey]  Default "gateway.session".
 * @property {{ initialDelay?: number, maxDelay?: number, factor?: number } | false} [reconnect]
 *     Backoff between reconnects in ms; defaults 250, 10000, 2. false: never reconnect.
 * @property {typeof WebSocket} [WebSocket]  For tests and non-browser hosts.
 */

const DEFAULT_STORAGE_KEY = "gateway.session";
const SAVE_DELAY_MS = 50;
const CLOSE_NORMAL = 1000;
const CLOSE_REJECTED = 4001;

/**
 * An error a tool may throw to say more than its message: whether another
 * attempt may succeed, a code, and structured detail for the worker.
 */
export class ToolError extends Error {
    /**
     * @param {string} message  Reaches the model; write it to be read.
     * @param {{ retryable?: boolean, code?: string, detail?: any }} [options]
     */
    constructor(message, { retryable, code, detail } = {}) {
        super(message);
        this.name = "ToolError";
        /** @type {boolean | undefined} */
        this.retryable = retryable;
        /** @type {string | undefined} */
        this.code = code;
        this.detail = detail;
    }
}

/**
 * Connects to the gateway and returns the client. Starts in a microtask.
 * @param {ConnectOptions} [options]
 * @returns {GatewayClient}
 */
export function connect(options = {}) {
    return new GatewayClient(options);
}

/**
 * A connection to one session of the gateway, surviving reconnects.
 *
 * Events (listen with `on(name, fn)`, fn gets the detail, or with
 * addEventListener, the detail is `event.detail`):
 *
 * | event | detail |
 * | --- | --- |
 * | `state` | `{state, retryIn?, code?}` connection: connecting, open, closed (retryIn ms until the next try) |
 * | `opened` | `{session, seq, resumed}` the gateway answered session.open |
 * | `reset` | `{reason}` the stored session is gone; a new conversation starts: clear the page |
 * | `message` | `{seq, message, replayed}` a transcript message (user, assistant, tool) |
 * | `delta` | `{seq, text, replayed}` a piece of streamed model text |
 * | `model.finished` | `{seq, stopReason, usage, error, replayed}` |
 * | `tool` | ToolCard, after every change to a call |
 * | `idle` | `{seq, replayed}` no turn and no call running |
 * | `client.event` | `{seq, name, data, replayed}` |
 * | `error` | `{code, message, seq?, replayed?}` seq is set for session errors, absent for a frame the gateway refused |
 * | `ended` | `{seq, reason, replayed}` the session closed |
 * | `frame` | every frame received, once (session events deduplicated) |
 * | `send` | every frame sent |
 *
 * `replayed` is true for events restored from storage or replayed by the
 * gateway on resume (the page has seen them before, or reloaded).
 */
export class GatewayClient extends EventTarget {
    /** @type {string} */ #url;
    /** @type {Record<string, Tool>} */ #tools = {};
    /** @type {Storage | null} */ #storage;
    /** @type {string} */ #storageKey;
    /** @type {{initialDelay: number, maxDelay: number, factor: number} | false} */ #reconnect;
    /** @type {typeof WebSocket} */ #WS;

    /** @type {WebSocket | null} */ #ws = null;
    #connId = 0; // increments per socket
    #opened = false; // the current socket got session.opened
    /** @type {ConnectionState} */ #state = "closed";
    #retries = 0;
    /** @type {ReturnType<typeof setTimeout> | null} */ #retryTimer = null;
    #closed = false; // close() was called
    #ended = false; // session.ended seen

    /** @type {string | null} */ #session = null;
    #seq = 0; // last session event seen
    #replayUntil = 0; // seq of the last event the current resume replays
    /** @type {any[]} */ #events = [];
    /** @type {ReturnType<typeof setTimeout> | null} */ #saveTimer = null;

    /** @type {Map<string, ToolCard>} */ #cards = new Map();
    /** @type {Map<string, Run>} */ #runs = new Map();
    /** @type {Set<string>} */ #settled = new Set();
    /** @type {any[]} */ #outbox = [];

    /** @param {ConnectOptions} options */
    constructor(options = {}) {
        super();
        const { url, tools = {}, storageKey = DEFAULT_STORAGE_KEY, reconnect = {} } = options;
        this.#WS = options.WebSocket ?? globalThis.WebSocket;
        this.#url = socketURL(url ?? "/ws");
        this.#storage = options.storage === undefined ? defaultStorage() : options.storage;
        this.#storageKey = storageKey;
        this.#reconnect = reconnect === false ? false : {
            initialDelay: reconnect.initialDelay ?? 250,
            maxDelay: reconnect.maxDelay ?? 10_000,
            factor: reconnect.factor ?? 2,
        };
        for (const [name, tool] of Object.entries(tools)) {
            this.#tools[name] = typeof tool === "function" ? { run: tool } : tool;
        }
        if (typeof addEventListener === "function") {
            addEventListener("pagehide", () => this.#save());
            addEventListener("online", () => this.#retryNow());
        }
        queueMicrotask(() => {
            if (this.#closed) return;
            this.#restore();
            this.#open();
        });
    }

    /** The session id, once known. @returns {string | null} */
    get session() { return this.#session; }
    /** The last session event's seq. */
    get seq() { return this.#seq; }
    /** @returns {ConnectionState} */
    get state() { return this.#state; }
    /** The names of the tools this page declares. @returns {string[]} */
    get tools() { return Object.keys(this.#tools); }
    /** Every session event seen, deduplicated, in seq order (a copy). */
    get events() { return this.#events.slice(); }
    /** Every tool call seen, in order (copies). @returns {ToolCard[]} */
    get cards() { return [...this.#cards.values()].map((c) => snapshot(c, false)); }

    /**
     * Adds a listener; fn receives the event's detail.
     * @param {string} type
     * @param {(detail: any) => void} fn
     * @returns {() => void} removes the listener
     */
    on(type, fn) {
        const h = (/** @type {Event} */ e) => fn(/** @type {CustomEvent} */ (e).detail);
        this.addEventListener(type, h);
        return () => this.removeEventListener(type, h);
    }

    /**
     * Sends a user message. Queued while the connection is down.
     * @param {string} content
     */
    send(content) {
        this.#post({ type: "message", content: String(content) });
    }

    /** Stops the current model turn and its open calls. */
    cancel() {
        if (!this.#opened && this.#outbox.some((f) => f.type === "cancel")) return;
        this.#post({ type: "cancel" });
    }

    /**
     * Closes the connection for good and aborts this page's running tools.
     * The stored session stays, so a reload still resumes it.
     */
    close() {
        this.#closed = true;
        this.#clearRetry();
        this.#abortRuns(() => true, "the client was closed");
        this.#save();
        const ws = this.#ws;
        this.#ws = null;
        this.#opened = false;
        ws?.close(CLOSE_NORMAL);
        this.#setState("closed");
    }

    /**
     * Forgets the session (and its stored copy) and opens a new one: a new
     * conversation. Emits `reset`.
     */
    reset() {
        this.#forget("reset");
        this.#ended = false;
        if (this.#closed) return;
        const ws = this.#ws;
        this.#ws = null;
        this.#opened = false;
        ws?.close(CLOSE_NORMAL);
        this.#open();
    }

    // --- connection ---

    #open() {
        if (this.#closed || !this.#WS) return;
        this.#clearRetry();
        const ws = new this.#WS(this.#url);
        this.#connId++;
        this.#ws = ws;
        this.#opened = false;
        this.#setState("connecting");
        ws.onopen = () => {
            if (ws !== this.#ws) return;
            /** @type {any} */
            const frame = { type: "session.open", tools: this.tools };
            if (this.#session) {
                frame.session = this.#session;
                frame.after = this.#seq;
            }
            this.#write(frame);
        };
        ws.onmessage = (e) => {
            if (ws === this.#ws) this.#onFrame(e.data);
        };
        ws.onclose = (e) => {
            if (ws === this.#ws) this.#onClose(e);
        };
    }

    /** @param {CloseEvent} e */
    #onClose(e) {
        const wasOpened = this.#opened;
        this.#ws = null;
        this.#opened = false;
        if (e.code === CLOSE_REJECTED && this.#session && !wasOpened) {
            // The gateway will not resume this session (unknown, not this
            // browser's, or lost in a restart): start a new conversation.
            this.#forget("the gateway refused to resume the session");
        }
        if (this.#closed || this.#ended || !this.#reconnect) {
            this.#setState("closed", { code: e.code });
            return;
        }
        const { initialDelay, maxDelay, factor } = this.#reconnect;
        // Capped exponential backoff with equal jitter: half fixed, half random.
        const ceiling = Math.min(maxDelay, initialDelay * factor ** this.#retries);
        const delay = Math.round(ceiling / 2 + Math.random() * ceiling / 2);
        this.#retries++;
        this.#setState("closed", { code: e.code, retryIn: delay });
        this.#retryTimer = setTimeout(() => this.#open(), delay);
    }

    #retryNow() {
        if (this.#retryTimer === null) return;
        this.#retries = 0;
        this.#open();
    }

    #clearRetry() {
        if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
        this.#retryTimer = null;
    }

    /** @param {ConnectionState} state @param {object} [extra] */
    #setState(state, extra = {}) {
        this.#state = state;
        this.#emit("state", { state, ...extra });
    }

    /** Sends now when the session is open, else queues until it is. */
    #post(frame) {
        if (this.#opened) this.#write(frame);
        else this.#outbox.push(frame);
    }

    #write(frame) {
        const ws = this.#ws;
        if (!ws || ws.readyState !== 1) return false;
        ws.send(JSON.stringify(frame));
        this.#emit("send", frame);
        return true;
    }

    // --- frames from the gateway ---

    /** @param {unknown} data */
    #onFrame(data) {
        let f;
        try {
            f = JSON.parse(String(data));
        } catch {
            this.#emit("error", { code: "bad_frame", message: "The gateway sent a frame that is not JSON." });
            return;
        }
        if (!f || typeof f.type !== "string") return;
        if (typeof f.seq === "number" && f.type !== "session.opened") {
            this.#onEvent(f, f.seq <= this.#replayUntil);
            return;
        }
        this.#emit("frame", f);
        switch (f.type) {
            case "session.opened": this.#onOpened(f); break;
            case "tool.call": this.#onToolCall(f); break;
            case "tool.cancel": this.#onToolCancel(f); break;
            case "error": this.#onRefused(f); break;
        }
    }

    #onOpened(f) {
        if (this.#session && f.session !== this.#session) this.#forget("the gateway opened a new session");
        const resumed = this.#session !== null;
        this.#session = f.session;
        this.#replayUntil = typeof f.seq === "number" ? f.seq : 0;
        this.#opened = true;
        this.#retries = 0;
        this.#save();
        this.#setState("open");
        this.#emit("opened", { session: f.session, seq: f.seq, resumed });
        // Answers finished while offline, then what the user did meanwhile.
        for (const run of this.#runs.values()) {
            if (run.answer && run.sentOn === 0) this.#sendAnswer(run);
        }
        const outbox = this.#outbox;
        this.#outbox = [];
        for (const frame of outbox) this.#write(frame);
    }

    /** An error frame without seq: the gateway refused one of our frames. */
    #onRefused(f) {
        const detail = { code: String(f.code ?? "error"), message: String(f.message ?? "") };
        this.#emit("error", detail);
        if (detail.code === "unknown_session" && !this.#opened && this.#session) {
            // Not this browser's, or gone (a restart): start a new
            // conversation on the same connection.
            this.#forget("the gateway does not know the session");
            this.#write({ type: "session.open", tools: this.tools });
        }
    }

    /**
     * A session event: drop it if seen, else record, persist and emit it.
     * @param {any} f
     * @param {boolean} replayed
     */
    #onEvent(f, replayed) {
        if (f.seq <= this.#seq) return;
        this.#seq = f.seq;
        this.#events.push(f);
        this.#scheduleSave();
        this.#emit("frame", f);
        const { seq } = f;
        switch (f.type) {
            case "message": {
                const message = f.message ?? {};
                this.#emit("message", { seq, message, replayed });
                if (message.role === "assistant" && Array.isArray(message.toolUses)) {
                    for (const use of message.toolUses) {
                        const card = this.#card(use.id, use.name);
                        if (!card.arguments) card.arguments = use.arguments ?? "";
                        this.#emitCard(card, replayed);
                    }
                } else if (message.role === "tool" && message.toolUseId) {
                    const card = this.#card(message.toolUseId, message.name);
                    card.transcript = { content: message.content ?? "", isError: !!message.isError };
                    this.#emitCard(card, replayed);
                }
                break;
            }
            case "model.delta":
                this.#emit("delta", { seq, text: f.text ?? "", replayed });
                break;
            case "model.finished":
                this.#emit("model.finished", { seq, stopReason: f.stopReason, usage: f.usage, error: f.error, replayed });
                break;
            case "tool.started": {
                const card = this.#card(f.id, f.name);
                Object.assign(card, {
                    status: isSettled(card.status) ? card.status : "running",
                    arguments: f.arguments ?? card.arguments,
                    input: f.input ?? card.input,
                    handler: f.handler ?? card.handler,
                    attempt: f.attempt ?? card.attempt,
                    attempts: f.attempts ?? card.attempts,
                    deadline: f.deadline ?? null,
                    backoff: null,
                });
                this.#emitCard(card, replayed);
                break;
            }
            case "tool.retrying": {
                const card = this.#card(f.id, f.name);
                card.failures.push({ attempt: f.attempt, error: f.error ?? "", code: f.code, backoff: f.backoff });
                if (!isSettled(card.status)) card.status = "retrying";
                card.attempt = (f.attempt ?? 0) + 1;
                card.attempts = f.attempts ?? card.attempts;
                card.backoff = f.backoff ?? null;
                card.deadline = null;
                this.#emitCard(card, replayed);
                break;
            }
            case "tool.finished": {
                const card = this.#card(f.id, f.name);
                card.status = f.ok ? "done" : "error";
                card.result = f.result;
                card.error = f.error;
                card.backoff = null;
                this.#settled.add(f.id);
                this.#abortRuns((r) => r.id === f.id, "the call settled");
                for (const [key, run] of this.#runs) if (run.id === f.id) this.#runs.delete(key);
                this.#emitCard(card, replayed);
                break;
            }
            case "session.idle":
                this.#emit("idle", { seq, replayed });
                break;
            case "client.event":
                this.#emit("client.event", { seq, name: f.name, data: f.data, replayed });
                break;
            case "error":
                this.#emit("error", { seq, code: String(f.code ?? "error"), message: String(f.message ?? ""), replayed });
                break;
            case "session.ended":
                this.#ended = true;
                this.#emit("ended", { seq, reason: f.reason, replayed });
                break;
        }
    }

    // --- tool cards ---

    /** @param {string} id @param {string} [name] @returns {ToolCard} */
    #card(id, name) {
        let card = this.#cards.get(id);
        if (!card) {
            card = {
                id, name: name ?? "", arguments: "", input: null, handler: null,
                status: "pending", attempt: 0, attempts: 0, deadline: null, backoff: null,
                failures: [], result: undefined, error: undefined,
                local: false, localState: null, transcript: null, replayed: false,
            };
            this.#cards.set(id, card);
        } else if (name && !card.name) {
            card.name = name;
        }
        return card;
    }

    /** @param {ToolCard} card @param {boolean} replayed */
    #emitCard(card, replayed) {
        this.#emit("tool", snapshot(card, replayed));
    }

    // --- client tool calls ---

    /** @param {ToolCallFrame} f */
    #onToolCall(f) {
        const key = `${f.id}#${f.attempt}`;
        const seen = this.#runs.get(key);
        if (seen) {
            // The same attempt delivered again (after a reconnect): never run
            // it twice; resend the answer if this connection has not had it.
            if (seen.answer && seen.sentOn !== this.#connId) this.#sendAnswer(seen);
            return;
        }
        if (this.#settled.has(f.id)) return; // settled already: answering would be refused
        this.#abortRuns((r) => r.id === f.id && r.attempt < f.attempt, `attempt ${f.attempt} replaced it`);

        /** @type {Run} */
        const deadline = f.deadline ? Date.parse(f.deadline) : NaN;
        const run = {
            key, id: f.id, attempt: f.attempt, controller: new AbortController(),
            deadline: Number.isNaN(deadline) ? 0 : deadline, answer: null, sentOn: 0, done: false,
        };
        this.#runs.set(key, run);
        const card = this.#card(f.id, f.name);
        Object.assign(card, {
            local: true,
            localState: "running",
            status: card.status === "pending" || card.status === "retrying" ? "running" : card.status,
            arguments: f.arguments ?? card.arguments,
            input: f.input ?? card.input,
            handler: card.handler ?? "client",
            attempt: f.attempt,
            attempts: f.attempts ?? card.attempts,
            deadline: f.deadline ?? card.deadline,
        });
        this.#emitCard(card, false);

        const base = { id: f.id, attempt: f.attempt };
        const tool = this.#tools[f.name];
        if (!tool || typeof tool.run !== "function") {
            this.#answer(run, { type: "tool.error", ...base, error: `This page has no tool named "${f.name}".`, code: "unknown_tool" });
            return;
        }
        const status = f.input?.status ?? "valid";
        if (status !== "valid" && !tool.acceptInvalid) {
            const proposed = f.proposed ?? {
                error: f.input?.error || "The arguments do not match the tool's input schema.",
                code: status === "malformed" ? "malformed_input" : "invalid_input",
            };
            this.#answer(run, { type: "tool.error", ...proposed, ...base });
            return;
        }
        /** @type {ToolContext} */
        const ctx = {
            signal: run.controller.signal,
            attempt: f.attempt,
            attempts: f.attempts,
            deadline: f.deadline ? new Date(f.deadline) : null,
            call: f,
        };
        Promise.resolve()
            .then(() => {
                // Cancelled in the same task it arrived in: never start it.
                if (run.done) throw ctx.signal.reason;
                return tool.run(f.input?.value, ctx);
            })
            .then(
                (result) => this.#answer(run, { type: "tool.result", ...base, result: result === undefined ? null : result }),
                (err) => this.#answer(run, { type: "tool.error", ...base, ...errorFields(err) }),
            );
    }

    /** @param {{id: string, attempt: number, reason?: string}} f */
    #onToolCancel(f) {
        const why = f.reason ? `cancelled by the gateway: ${f.reason}` : "cancelled by the gateway";
        const match = (/** @type {Run} */ r) => r.id === f.id && (f.attempt === undefined || r.attempt === f.attempt);
        const run = [...this.#runs.values()].find(match);
        // A timeout when the gateway says so, or, when its reason does not
        // tell, when the attempt's deadline has passed (give or take a little
        // clock skew).
        const timeout = f.reason === "timeout" ||
            (f.reason !== "cancelled" && !!run?.deadline && Date.now() >= run.deadline - 250);
        this.#abortRuns(match, why, timeout);
    }

    /**
     * Aborts the running runs that match.
     * @param {(run: Run) => boolean} match
     * @param {string} why
     * @param {boolean} [timeout]
     */
    #abortRuns(match, why, timeout = false) {
        for (const run of this.#runs.values()) {
            if (run.done || !match(run)) continue;
            run.done = true;
            run.controller.abort(new DOMException(why, timeout ? "TimeoutError" : "AbortError"));
            const card = this.#cards.get(run.id);
            if (card && card.attempt === run.attempt) {
                card.localState = "cancelled";
                this.#emitCard(card, false);
            }
        }
    }

    /** @param {Run} run @param {any} frame */
    #answer(run, frame) {
        if (run.done) return; // cancelled: the gateway ignores late answers
        run.done = true;
        try {
            JSON.stringify(frame);
        } catch (err) {
            frame = { type: "tool.error", id: run.id, attempt: run.attempt, error: `The tool's result is not JSON: ${messageOf(err)}`, code: "tool_failed" };
        }
        run.answer = frame;
        const card = this.#cards.get(run.id);
        if (card && card.attempt === run.attempt) {
            card.localState = "answered";
            this.#emitCard(card, false);
        }
        this.#sendAnswer(run);
    }

    /** @param {Run} run */
    #sendAnswer(run) {
        if (this.#opened && this.#write(run.answer)) run.sentOn = this.#connId;
    }

    // --- persistence ---

    #restore() {
        if (!this.#storage) return;
        let data;
        try {
            data = JSON.parse(this.#storage.getItem(this.#storageKey) ?? "null");
        } catch {
            return;
        }
        if (!data || typeof data.session !== "string" || !data.session) return;
        this.#session = data.session;
        const events = Array.isArray(data.events) ? data.events : [];
        const ordered = events.every((e, i) => e && typeof e.seq === "number" && typeof e.type === "string" && (i === 0 || e.seq > events[i - 1].seq));
        if (!ordered || events.length === 0 || events[events.length - 1].seq !== data.seq) return; // resume from 0
        for (const e of events) this.#onEvent(e, true);
    }

    #scheduleSave() {
        if (!this.#storage || this.#saveTimer !== null) return;
        this.#saveTimer = setTimeout(() => this.#save(), SAVE_DELAY_MS);
    }

    #save() {
        if (this.#saveTimer !== null) clearTimeout(this.#saveTimer);
        this.#saveTimer = null;
        if (!this.#storage || !this.#session) return;
        const key = this.#storageKey;
        try {
            this.#storage.setItem(key, JSON.stringify({ v: 1, session: this.#session, seq: this.#seq, events: this.#events }));
        } catch {
            // Over quota: keep only the session; a reload replays it from the gateway.
            try {
                this.#storage.setItem(key, JSON.stringify({ v: 1, session: this.#session, seq: 0, events: [] }));
            } catch { /* storage unusable */ }
        }
    }

    /** Drops the session and everything about it. @param {string} reason */
    #forget(reason) {
        this.#abortRuns(() => true, "the session was reset");
        this.#session = null;
        this.#seq = 0;
        this.#replayUntil = 0;
        this.#events = [];
        this.#cards.clear();
        this.#runs.clear();
        this.#settled.clear();
        this.#outbox = this.#outbox.filter((f) => f.type === "message");
        if (this.#saveTimer !== null) clearTimeout(this.#saveTimer);
        this.#saveTimer = null;
        try {
            this.#storage?.removeItem(this.#storageKey);
        } catch { /* storage unusable */ }
        this.#emit("reset", { reason });
    }

    /** @param {string} type @param {any} detail */
    #emit(type, detail) {
        this.dispatchEvent(new CustomEvent(type, { detail }));
    }
}

/**
 * @typedef {object} Run  This page's run of one attempt.
 * @property {string} key
 * @property {string} id
 * @property {number} attempt
 * @property {AbortController} controller
 * @property {number} deadline  ms since the epoch; 0: none
 * @property {any} answer   The tool.result or tool.error frame, once known.
 * @property {number} sentOn The connection the answer went out on; 0: not sent.
 * @property {boolean} done Answered or aborted: nothing more to send.
 */

/** @param {ToolStatus} s */
function isSettled(s) {
    return s === "done" || s === "error";
}

/** @param {ToolCard} card @param {boolean} replayed @returns {ToolCard} */
function snapshot(card, replayed) {
    return {
        ...card,
        input: card.input ? { ...card.input } : null,
        failures: card.failures.map((f) => ({ ...f })),
        transcript: card.transcript ? { ...card.transcript } : null,
        replayed,
    };
}

/** @param {unknown} err */
function messageOf(err) {
    if (err instanceof Error) return err.message || err.name;
    if (typeof err === "string") return err;
    try {
        return JSON.stringify(err) ?? String(err);
    } catch {
        return String(err);
    }
}

/** The tool.error fields for a thrown value. @param {any} err */
function errorFields(err) {
    /** @type {{error: string, retryable?: boolean, code?: string, detail?: any}} */
    const fields = { error: messageOf(err) || "The tool failed." };
    if (err && typeof err === "object") {
        if (typeof err.retryable === "boolean") fields.retryable = err.retryable;
        if (err instanceof ToolError && typeof err.code === "string") fields.code = err.code;
        if (err instanceof ToolError && err.detail !== undefined) fields.detail = err.detail;
    }
    return fields;
}

/** @param {string} url */
function socketURL(url) {
    const base = typeof location === "object" ? location.href : undefined;
    const u = new URL(url, base);
    if (u.protocol === "http:") u.protocol = "ws:";
    if (u.protocol === "https:") u.protocol = "wss:";
    return u.href;
}

function defaultStorage() {
    try {
        return globalThis.sessionStorage ?? null;
    } catch {
        return null; // blocked (sandboxed frame, privacy settings)
    }
}
