/**
 * gateway.js: the browser SDK of the client-tools gateway, and its entry
 * point. Plain ES modules, no build step. The client opens the gateway's
 * WebSocket (`/ws`), opens or resumes a session, runs the client tools the
 * model calls, answers them, and turns the session's events into a few easy
 * ones for a chat UI. Protocol: docs/protocol.md; API: docs/sdk.md.
 *
 * This module is the session: session.open and resume, its events deduplicated
 * by seq and turned into the client's events. The other jobs, a module each:
 * - outbox.js: frames waiting for the session; messages sent again until confirmed.
 * - connection.js: the WebSocket, reopened with backoff; the gateway's limits.
 * - store.js: the session's copy in sessionStorage, for reloads.
 * - events.js: the client's events for the session's (a sub-agent's: `subagent`).
 * - cards.js: the tool-card view model (the `tool` event).
 * - runner.js: running this page's client tools, and ToolError.
 * - codes.js: the wire codes (close codes, error codes), re-exported here.
 *
 * Exports: connect(options), GatewayClient, ToolError, LimitError, codes.js's tables (CLOSE, TOOL_ERROR, ...).
 * @example
 * import { connect, ToolError } from "/static/gateway.js";
 * const client = connect({ tools: { get_local_time: () => ({ time: new Date().toISOString() }) } });
 * client.on("tool", (card) => renderToolCard(card)); // and delta, message, idle, state, ...
 * client.send("what time is it");
 *
 * Guarantees:
 * - The first frame on every connection is `session.open`. The session id,
 *   the last seq seen (and session.opened's epoch) and the session's events are
 *   kept in sessionStorage, so a page reload shows the conversation again at
 *   once and resumes with `after` = the last seq (replayed: what it missed).
 * - Reconnects with capped exponential backoff and jitter (and so opens
 *   again a session.open the gateway refused, store_unavailable say); emits
 *   every session event once, in seq order, however often it is replayed.
 * - A delivered `tool.call` runs once per (id, attempt); its answer is sent
 *   again after a reconnect until the call settles (runner.js).
 * - A user message is taken once, and sent again until the gateway has it (outbox.js).
 * - Listeners added in the same task as connect() see every event.
 * - Nothing over the gateway's limits (session.opened's) is sent: send()
 *   throws a LimitError; a tool's answer too large becomes a tool.error.
 *
 * @module gateway
 */

import { FRAME_ERROR, TOOL_ERROR } from "./codes.js";
import { Connection, DEFAULT_LIMITS, answerWait, messageOverLimits, readLimits, socketURL } from "./connection.js";
import { DEFAULT_STORAGE_KEY, SessionStore, defaultStorage } from "./store.js";
import { ToolCards } from "./cards.js";
import { clientEvent, parentOf } from "./events.js";
import { Runner } from "./runner.js";
import { Outbox, newMessageId } from "./outbox.js";

export { ToolError } from "./runner.js";
export { LimitError } from "./connection.js";
export { CLOSE, FRAME_ERROR, SESSION_ERROR, TOOL_ERROR, CANCEL_REASON, STOP_REASON, GUARD } from "./codes.js";

/**
 * @typedef {import("./runner.js").Tool} Tool
 * @typedef {import("./runner.js").ToolContext} ToolContext
 * @typedef {import("./runner.js").ToolCallFrame} ToolCallFrame
 * @typedef {import("./cards.js").ToolCard} ToolCard  (and ToolWhere, ToolStatus there)
 *
 * @typedef {"connecting" | "open" | "closed"} ConnectionState
 *
 * @typedef {object} ConnectOptions
 * @property {string} [url]  WebSocket URL; default `/ws` on this page's host (http(s) and relative become ws(s)).
 * @property {Record<string, Tool | Tool["run"]>} [tools]  The client tools this page runs, by name.
 * @property {import("./store.js").StorageLike | null} [storage]  Where it is kept across
 *     reloads; default sessionStorage (per tab). null: nowhere.
 * @property {string} [storageKey]  Default "gateway.session".
 * @property {{ initialDelay?: number, maxDelay?: number, factor?: number } | false} [reconnect]
 *     Backoff between reconnects in ms; defaults 250, 10000, 2. false: never reconnect.
 * @property {number | false} [answerTimeout]  ms a message, answer, approval or Stop (a session.open:
 *     65000 at least) may go unanswered before the socket is taken for dead; default 15000, false: never.
 * @property {typeof WebSocket} [WebSocket]  For tests and non-browser hosts.
 */

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
 * Events: `on(name, fn)` calls fn with the detail (or addEventListener:
 * `event.detail`): state, opened, reset (clear the page), message, delta,
 * model.retrying, model.finished, discarded, tool (a ToolCard), idle, guard, client.event,
 * error, ended, subagent, frame and send; docs/sdk.md#events says each
 * one's detail.
 * `replayed` is true for events the page has shown before.
 */
export class GatewayClient extends EventTarget {
    /** @type {Connection} */ #conn;
    #opened = false; // the current socket got session.opened
    #epoch = ""; // the run of the session in the gateway our copy came from (session.opened's)
    #opens = 0; // session.opened seen: a new socket's, or a move's on the same socket
    /** @type {ConnectionState} */ #state = "closed";
    #closed = false; // close() was called
    #ended = false; // session.ended seen

    /** @type {string | null} */ #session = null;
    #seq = 0; // last session event seen
    #replayUntil = 0; // seq of the last event the current resume replays
    #flushAfterReplay = false; // answers wait for the replay: it says which calls settled
    /** @type {any[]} */ #events = [];
    /** @type {Outbox} */ #outbox = new Outbox(() => this.#store.schedule());
    #limits = DEFAULT_LIMITS; // the gateway's, from session.opened

    /** @type {SessionStore} */ #store;
    /** @type {ToolCards} */ #cards;
    /** @type {Runner} */ #runner;

    /** @param {ConnectOptions} options */
    constructor(options = {}) {
        super();
        const { url, tools = {}, storageKey = DEFAULT_STORAGE_KEY, reconnect = {} } = options;
        const storage = options.storage === undefined ? defaultStorage() : options.storage;
        this.#store = new SessionStore(storage, storageKey,
            () => this.#session ? { session: this.#session, seq: this.#seq, epoch: this.#epoch, events: this.#events, unsent: this.#outbox.unsent } : null);
        this.#conn = new Connection(socketURL(url ?? "/ws"), options.WebSocket ?? globalThis.WebSocket, reconnect, {
            open: () => this.#sendOpen(),
            frame: (data) => this.#onFrame(data),
            closed: () => {
                this.#opened = false;
                return !this.#closed && !this.#ended;
            },
            state: (state, extra) => this.#setState(state, extra),
        }, options.answerTimeout ?? 15_000);
        this.#cards = new ToolCards((card) => this.#emit("tool", card), (f) => this.#opened && (this.#write(f), true), () => this.#opens);
        this.#runner = new Runner(tools, {
            conn: () => this.#opens, // an answer goes again after each session.opened
            write: (frame) => this.#opened && this.#write(frame),
            frameBytes: () => this.#limits.frameBytes,
        }, this.#cards);
        if (typeof addEventListener === "function") {
            addEventListener("pagehide", () => this.#store.flush());
            this.#conn.watchWake(globalThis); // online, a wake from a sleep, the tab shown: retry or probe
        }
        queueMicrotask(() => {
            if (this.#closed) return;
            this.#restore();
            this.#conn.open();
        });
    }

    /** The session id, once known. @returns {string | null} */
    get session() { return this.#session; }
    /** This connection's page id, from session.opened (new on every connection;
     * the last one's while reconnecting; null before the first). @returns {string | null} */
    get page() { return this.#cards.page; }
    /** The last session event's seq. */
    get seq() { return this.#seq; }
    /** @returns {ConnectionState} */
    get state() { return this.#state; }
    /** ms the gateway's clock is ahead of this page's (session.opened's `now`; 0 before it): its time is Date.now() + clockSkew. */
    get clockSkew() { return this.#cards.skew; }
    /** The gateway's limits, in bytes: `{frameBytes, messageBytes}`. */
    get limits() { return this.#limits; }
    /** The names of the tools this page declares. @returns {string[]} */
    get tools() { return this.#runner.names; }
    /** Every session event seen, deduplicated, in seq order (a copy). */
    get events() { return this.#events.slice(); }
    /** Every tool call seen, in order (copies). @returns {ToolCard[]} */
    get cards() { return this.#cards.list(); }

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
     * @throws {LimitError} it is over the gateway's limits: not sent (also an `error` event)
     */
    send(content) {
        const frame = { type: "message", content: String(content), id: newMessageId() };
        const err = this.#overLimits(frame);
        if (err) throw err;
        this.#post(frame);
    }

    /** Stops the current model turn and its open calls; offline, it goes once the page is back: before the messages queued offline when a turn was running, which it stops, else after them, stopping theirs. */
    cancel() {
        if (!this.#opened && this.#outbox.waits("cancel")) return;
        this.#post({ type: "cancel" }, this.#running());
    }

    #running() { return this.#events.length > 0 && this.#events.at(-1).type !== "session.idle"; } // a turn runs

    /**
     * Closes the connection for good and aborts this page's running tools.
     * The stored session stays, so a reload still resumes it.
     */
    close() {
        this.#closed = true;
        this.#runner.abortAll("the client was closed");
        this.#store.flush();
        this.#opened = false;
        this.#conn.stop();
        this.#setState("closed");
    }

    /** Forgets the session (and its stored copy) and opens a new one: "New chat". Emits `reset`. */
    reset() { this.open(null); }

    /**
     * Forgets the current session and opens `session`, one of this
     * browser's (GET /sessions lists them), from its start (`after` 0):
     * switching chats. Emits `reset`, then the session's events, replayed.
     * null opens a new session, as reset() does.
     * @param {string | null} session
     */
    open(session) {
        this.#forget(session ? "open" : "reset");
        this.#session = session || null;
        this.#ended = false;
        if (this.#closed) return;
        this.#opened = false;
        this.#conn.drop();
        this.#conn.open();
    }

    // --- connection ---

    /** The first frame on every connection: open a new session, or resume ours. */
    #sendOpen() {
        this.#opened = false;
        // A resume says where our copy ends, and the run it came from (epoch): one that lost events we saw refuses it (bad_frame), and we open from the start.
        const resume = this.#session && { session: this.#session, after: this.#seq, ...(this.#epoch && this.#seq > 0 && { epoch: this.#epoch }) };
        this.#write({ type: "session.open", tools: this.tools, ...resume });
    }

    /** @param {ConnectionState} state @param {object} [extra] */
    #setState(state, extra = {}) {
        this.#state = state;
        this.#emit("state", { state, ...extra });
    }

    /** Sends now when the session is open, else queues until it is. */
    #post(frame, ahead = false) {
        if (this.#opened) this.#write(frame);
        else this.#outbox.wait(frame, ahead);
    }

    #write(frame) {
        const written = this.#conn.write(frame, answerWait(frame, this.#running()));
        this.#outbox.written(frame, this.#running()); // kept until the gateway confirms it, written or not: the next connection sends it
        if (written) this.#emit("send", frame);
        return written;
    }

    // --- frames from the gateway ---

    /** @param {unknown} data */
    #onFrame(data) {
        let f;
        try {
            f = JSON.parse(String(data));
        } catch {
            this.#emit("error", { code: FRAME_ERROR.BAD_FRAME, message: "The gateway sent a frame that is not JSON." });
            return;
        }
        if (!f || typeof f.type !== "string") return;
        if (typeof f.seq === "number" && f.type !== "session.opened") {
            this.#onEvent(f, f.seq <= this.#replayUntil);
            if (this.#flushAfterReplay && f.seq >= this.#replayUntil) {
                this.#flushAfterReplay = false;
                this.#runner.flush();
            }
            return;
        }
        this.#emit("frame", f);
        switch (f.type) {
            case "session.opened": this.#onOpened(f); break;
            case "tool.call": this.#runner.call(f); break;
            case "tool.cancel": this.#runner.cancel(f); break;
            case "message.taken": this.#outbox.confirm(String(f.id)); break;
            case "error": this.#onRefused(f); break;
        }
    }

    #onOpened(f) {
        if (this.#session && f.session !== this.#session) this.#forget("new_session");
        const resumed = this.#session !== null;
        const page = typeof f.page === "string" && f.page ? f.page : null;
        this.#session = f.session;
        this.#epoch = typeof f.epoch === "string" ? f.epoch : "";
        this.#limits = readLimits(f.limits, this.#limits);
        this.#replayUntil = resumed && typeof f.seq === "number" ? f.seq : 0; // a new session's events are new
        this.#opened = true;
        this.#opens++;
        this.#conn.connected();
        this.#store.flush();
        this.#cards.page = page; // re-emits the cards whose `where` this changes
        if (!Number.isNaN(Date.parse(f.now))) this.#cards.skew = Date.parse(f.now) - Date.now(); // deadlines are on the gateway's clock
        this.#setState("open");
        this.#emit("opened", { session: f.session, seq: f.seq, resumed, page });
        // Answers not sent since this session.opened go after its replay (which calls are open), then the rest.
        this.#flushAfterReplay = this.#replayUntil > this.#seq;
        if (!this.#flushAfterReplay) this.#runner.flush();
        // The messages not confirmed first (a copy the gateway has is only
        // confirmed), then what waited, maybe over the limits just told.
        for (const frame of this.#outbox.take()) if (frame.type !== "message" || !this.#overLimits(frame)) this.#write(frame);
    }

    /** The LimitError of a message over the gateway's limits, also emitted; null if it fits. */
    #overLimits(frame) {
        const err = messageOverLimits(frame, this.#limits);
        if (err) this.#emit("error", { code: err.code, message: err.message, refused: frame });
        return err;
    }

    /** An error frame without seq: the gateway refused one of our frames (FRAME_ERROR). */
    #onRefused(f) {
        const code = String(f.code ?? "error");
        const refused = typeof f.id === "string" ? this.#outbox.confirm(f.id) : null;
        // A refused session.open: a new one (unknown_session, session_unreadable), ours from its start (bad_frame: a damaged store lost events), else again after the backoff.
        const open = !this.#opened && code !== FRAME_ERROR.NOT_OPEN;
        const anew = open && (code === FRAME_ERROR.UNKNOWN_SESSION || code === FRAME_ERROR.SESSION_UNREADABLE) && this.#session;
        const restart = open && code === FRAME_ERROR.BAD_FRAME && this.#session && this.#seq > 0;
        const retrying = open && !anew && !restart;
        this.#emit("error", { code, message: String(f.message ?? ""), ...(refused && { refused }), ...(retrying && { retrying }) });
        if (anew) {
            this.#forget(code); // unknown_session or session_unreadable
            this.#write({ type: "session.open", tools: this.tools });
        } else if (restart) {
            const unsent = this.#outbox.take().filter((f) => f.type === "message");
            this.open(this.#session);
            this.#outbox.restore(unsent);
        } else if (retrying) this.#conn.retryLater();
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
        if (!replayed || f.seq >= this.#replayUntil) this.#store.schedule(); // a replay's copy (megabytes, a long chat's): once in, or at pagehide
        this.#emit("frame", f);
        this.#outbox.saw(f); // a turn's end confirms a Stop
        const out = clientEvent(f, replayed);
        if (f.type === "session.ended" && !parentOf(f)) this.#ended = true;
        if (out) this.#emit(...out);
        // Tool uses, tool.started, tool.leased, tool.retrying, tool.finished
        // and tool messages change cards. A run of a failed attempt stops
        // first, so that its card, still on that attempt, shows it.
        if (f.type === "tool.retrying") this.#runner.failed(f.id, f.attempt, f.code === TOOL_ERROR.TIMEOUT);
        this.#cards.apply(f, replayed);
        if (f.type === "tool.finished") this.#runner.settle(f.id);
    }

    // --- persistence ---

    #restore() {
        const data = this.#store.load();
        if (!data) return;
        this.#session = data.session;
        this.#epoch = data.epoch ?? "";
        this.#outbox.restore(data.unsent);
        for (const e of data.events) this.#onEvent(e, true);
    }

    /** Drops the session and everything about it. @param {string} reason */
    #forget(reason) {
        this.#runner.abortAll("the session was reset");
        this.#session = null;
        this.#seq = 0;
        this.#epoch = "";
        this.#replayUntil = 0;
        this.#events = [];
        this.#cards.clear();
        this.#runner.clear();
        this.#outbox.forget();
        this.#store.clear();
        this.#emit("reset", { reason });
    }

    /** @param {string} type @param {any} detail */
    #emit(type, detail) {
        this.dispatchEvent(new CustomEvent(type, { detail }));
    }
}

