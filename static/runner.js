/**
 * runner.js: runs the client tool calls the gateway delivers to this page
 * (`tool.call`) and answers them (`tool.result`, `tool.error`).
 *
 * - Each attempt runs at most once per `id#attempt`. A duplicate delivery of
 *   a running attempt is ignored; one of an attempt that already finished
 *   here resends its answer, unless it already went out on this connection.
 * - `flush()`, which the client calls once a reconnect's replay is read,
 *   sends every answer of a call still open that has not gone out on this
 *   connection: one written to a socket that was already dead is not lost,
 *   even when the call has moved to another tab meanwhile (the gateway
 *   takes an answer from any page of the session). The user's approvals
 *   go again too (cards.js keeps them).
 * - A run's signal aborts on `tool.cancel` (TimeoutError for a timeout,
 *   else AbortError), when a later attempt of its call arrives, when its
 *   attempt failed (`failed`, from tool.retrying: a page that lost the
 *   lease gets no tool.cancel), when the call settles (`settle`), and on
 *   `abortAll` (close, reset). An aborted run's answer is dropped: the
 *   gateway would refuse it.
 * - Bad input is answered with the delivery's `proposed` tool.error unless
 *   the tool has `acceptInvalid`; an unknown tool with `unknown_tool`.
 * - An answer larger than the gateway reads in a frame is never sent (the
 *   gateway would close the socket, and the page would send it again after
 *   every reconnect): a terminal `tool_failed` tool.error that names both
 *   sizes goes instead, so the model reads why.
 *
 * Exports:
 * - Runner: call(frame), cancel(frame), failed(id, attempt, timeout),
 *   settle(id), abortAll(why), flush(), clear().
 * - ToolError: an error a tool throws to say more than its message.
 *
 * @module runner
 */

import { CANCEL_REASON, TOOL_ERROR } from "./codes.js";
import { byteLength, bytesText, frameLength } from "./connection.js";

/**
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
 * @property {string} [code]       One of TOOL_ERROR (codes.js).
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
 *     later attempt of the call arrives, when the call settles, and on close().
 * @property {number} attempt       This attempt, from 1.
 * @property {number} attempts      The call's total attempts.
 * @property {Date | null} deadline When the gateway times this attempt out: each progress report it took moves it.
 * @property {ToolCallFrame} call   The delivery itself.
 * @property {(p?: {progress?: number, total?: number, message?: string}) => void} progress
 *     Says the tool is still working (`tool.progress`): each report moves the
 *     attempt's deadline to its timeout from now, up to its policy's
 *     maxTimeout. Ignored once the run is over.
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
 * @typedef {object} Link  How the runner reaches the gateway.
 * @property {() => number} conn  The current connection's number (1, 2, ...).
 * @property {(frame: any) => boolean} write  Sends a frame if the session is
 *     open on the current connection; false when it is not.
 * @property {() => number} frameBytes  The largest frame the gateway reads.
 *
 * @typedef {object} CardHooks  What the runner tells the tool cards (cards.js).
 * @property {(f: ToolCallFrame) => void} delivered
 * @property {(id: string, attempt: number, state: "running" | "answered" | "cancelled") => void} localState
 * @property {() => void} resend  Sends again the user's approvals not taken (flush).
 *
 * @typedef {object} Run  This page's run of one attempt.
 * @property {string} key    `${id}#${attempt}`
 * @property {string} id
 * @property {number} attempt
 * @property {AbortController} controller
 * @property {any} answer   The tool.result or tool.error frame, once known.
 * @property {number} bytes  The answer's size on the wire.
 * @property {number} sentOn The session.opened (its count, link.conn) the answer went out after; 0: not sent.
 * @property {boolean} done Answered or aborted: nothing more to send.
 */

/** The longest tool.progress message the gateway takes, in bytes of UTF-8. */
const PROGRESS_MESSAGE_BYTES = 500;

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** text cut to at most n bytes of UTF-8, between characters. @param {string} text @param {number} n */
function clipUTF8(text, n) {
    const bytes = utf8.encode(text);
    if (bytes.length <= n) return text;
    let cut = n;
    while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--; // not inside a character
    return utf8Decoder.decode(bytes.subarray(0, cut));
}

/** @typedef {(typeof TOOL_ERROR)[keyof typeof TOOL_ERROR]} ToolErrorCode */
/** @type {Set<string>} */
const TOOL_CODES = new Set(Object.values(TOOL_ERROR));

/**
 * An error a tool may throw to say more than its message: whether another
 * attempt may succeed, a code (one of TOOL_ERROR: another throws a
 * TypeError), and structured detail for the worker.
 */
export class ToolError extends Error {
    /**
     * @param {string} message  Reaches the model; write it to be read.
     * @param {{ retryable?: boolean, code?: string, detail?: any }} [options]
     */
    constructor(message, { retryable, code, detail } = {}) {
        if (code != null && code !== "" && !TOOL_CODES.has(code)) {
            // The gateway refuses a tool.error with any other code (bad_frame),
            // which would leave the call to time out.
            throw new TypeError(`ToolError code ${JSON.stringify(code)} is not one of TOOL_ERROR's (codes.js); leave it out for tool_failed`);
        }
        super(message);
        this.name = "ToolError";
        /** @type {boolean | undefined} */
        this.retryable = retryable;
        /** @type {ToolErrorCode | undefined} */
        this.code = /** @type {ToolErrorCode | undefined} */ (code);
        this.detail = detail;
    }
}

/** Runs this page's client tools. */
export class Runner {
    /** @type {Record<string, Tool>} */ #tools = {};
    /** @type {Map<string, Run>} */ #runs = new Map();
    /** @type {Set<string>} */ #settled = new Set();
    /** @type {Link} */ #link;
    /** @type {CardHooks} */ #cards;

    /**
     * @param {Record<string, Tool | Tool["run"]>} tools
     * @param {Link} link
     * @param {CardHooks} cards
     */
    constructor(tools, link, cards) {
        for (const [name, tool] of Object.entries(tools)) {
            // The gateway would refuse every session.open, and the page retry for ever.
            if (!name || byteLength(name) > 64) throw new TypeError(`tool name ${JSON.stringify(name)}: a tool's name is 1 to 64 bytes`);
            this.#tools[name] = typeof tool === "function" ? { run: tool } : tool;
        }
        this.#link = link;
        this.#cards = cards;
    }

    /** The names of the tools this page declares. @returns {string[]} */
    get names() {
        return Object.keys(this.#tools);
    }

    /**
     * A `tool.call` delivery: run it, or resend its answer.
     * @param {ToolCallFrame} f
     */
    call(f) {
        const key = `${f.id}#${f.attempt}`;
        const seen = this.#runs.get(key);
        if (seen) {
            // The same attempt delivered again (after a reconnect): never run
            // it twice; resend the answer if this connection has not had it.
            if (seen.answer && seen.sentOn !== this.#link.conn()) this.#send(seen);
            return;
        }
        if (this.#settled.has(f.id)) return; // settled already: answering would be refused
        this.#abort((r) => r.id === f.id && r.attempt < f.attempt, `attempt ${f.attempt} replaced it`);

        /** @type {Run} */
        const run = {
            key, id: f.id, attempt: f.attempt, controller: new AbortController(),
            answer: null, bytes: 0, sentOn: 0, done: false,
        };
        this.#runs.set(key, run);
        this.#cards.delivered(f);

        const base = { id: f.id, attempt: f.attempt };
        const tool = this.#tools[f.name];
        if (!tool || typeof tool.run !== "function") {
            this.#answer(run, { type: "tool.error", ...base, error: `This page has no tool named "${f.name}".`, code: TOOL_ERROR.UNKNOWN_TOOL });
            return;
        }
        const status = f.input?.status ?? "valid";
        if (status !== "valid" && !tool.acceptInvalid) {
            const proposed = f.proposed ?? {
                error: f.input?.error || "The arguments do not match the tool's input schema.",
                code: status === "malformed" ? TOOL_ERROR.MALFORMED_INPUT : TOOL_ERROR.INVALID_INPUT,
            };
            this.#answer(run, { type: "tool.error", ...proposed, ...base });
            return;
        }
        const cards = this.#cards;
        /** @type {ToolContext} */
        const ctx = {
            signal: run.controller.signal,
            attempt: f.attempt,
            attempts: f.attempts,
            get deadline() { const at = cards.deadlineOf(f.id, f.attempt) ?? f.deadline; return at ? new Date(Date.parse(at) - cards.skew) : null; },
            call: f,
            progress: ({ progress, total, message } = {}) => {
                if (run.done) return;
                this.#link.write({
                    type: "tool.progress", ...base,
                    ...(progress >= 0 && Number.isFinite(progress) && { progress }), ...(total >= 0 && Number.isFinite(total) && { total }),
                    ...(typeof message === "string" && message && { message: clipUTF8(message, PROGRESS_MESSAGE_BYTES) }),
                });
            },
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

    /**
     * A `tool.cancel`: abort that attempt. The gateway always says which
     * attempt, and why: `timeout` or `cancelled` (docs/protocol.md).
     * @param {{id: string, attempt: number, reason: string}} f
     */
    cancel(f) {
        const match = (/** @type {Run} */ r) => r.id === f.id && r.attempt === f.attempt;
        this.#abort(match, `cancelled by the gateway: ${f.reason}`, f.reason === CANCEL_REASON.TIMEOUT);
    }

    /**
     * An attempt of the call failed (`tool.retrying`): abort this page's
     * runs of it and of any earlier attempt. The page that held the attempt
     * had a tool.cancel already; this stops a run the lease moved away from.
     * @param {string} id
     * @param {number} attempt
     * @param {boolean} timeout  It timed out: the signal's reason is a TimeoutError.
     */
    failed(id, attempt, timeout) {
        const match = (/** @type {Run} */ r) => r.id === id && r.attempt <= attempt;
        this.#abort(match, `attempt ${attempt} failed`, timeout);
        // An answer to an attempt that ended would only be refused.
        for (const [key, run] of this.#runs) if (match(run)) this.#runs.delete(key);
    }

    /**
     * The call settled (`tool.finished`): abort its runs here and ignore
     * any later delivery of it.
     * @param {string} id
     */
    settle(id) {
        this.#settled.add(id);
        this.#abort((r) => r.id === id, "the call settled");
        for (const [key, run] of this.#runs) if (run.id === id) this.#runs.delete(key);
    }

    /** Aborts every running run. @param {string} why */
    abortAll(why) {
        this.#abort(() => true, why);
    }

    /**
     * Sends the answers of open calls that have not gone out on this
     * connection: those finished while it was down, and those written to a
     * socket that turned out dead. Call it once the replay is read, so
     * calls that settled meanwhile are known.
     */
    flush() {
        for (const run of this.#runs.values()) {
            if (run.answer && run.sentOn !== this.#link.conn()) this.#send(run);
        }
        this.#cards.resend(); // the user's approvals too
    }

    /** Forgets every run and settled call (a new session); abort first. */
    clear() {
        this.#runs.clear();
        this.#settled.clear();
    }

    /**
     * Aborts the running runs that match.
     * @param {(run: Run) => boolean} match
     * @param {string} why
     * @param {boolean} [timeout]
     */
    #abort(match, why, timeout = false) {
        for (const run of this.#runs.values()) {
            if (run.done || !match(run)) continue;
            run.done = true;
            run.controller.abort(new DOMException(why, timeout ? "TimeoutError" : "AbortError"));
            this.#cards.localState(run.id, run.attempt, "cancelled");
        }
    }

    /** @param {Run} run @param {any} frame */
    #answer(run, frame) {
        if (run.done) return; // cancelled: the gateway ignores late answers
        run.done = true;
        let bytes;
        try {
            if (frame.type === "tool.result" && unsendable(frame.result)) {
                throw new TypeError(`JSON has no ${typeof frame.result === "object" ? "value for what its toJSON() returned" : typeof frame.result}`);
            }
            bytes = frameLength(frame);
        } catch (err) {
            const what = frame.type === "tool.result" ? "result" : "error";
            frame = { type: "tool.error", id: run.id, attempt: run.attempt, error: `The tool's ${what} is not JSON: ${messageOf(err)}`, code: TOOL_ERROR.TOOL_FAILED };
            bytes = frameLength(frame);
        }
        run.answer = frame;
        run.bytes = bytes;
        this.#cards.localState(run.id, run.attempt, "answered");
        this.#send(run);
    }

    /** @param {Run} run */
    #send(run) {
        // Checked at every send: a reconnect may bring a smaller limit.
        const limit = this.#link.frameBytes();
        if (run.bytes > limit) {
            const what = run.answer.type === "tool.result" ? "result" : "error";
            run.answer = {
                type: "tool.error", id: run.id, attempt: run.attempt, code: TOOL_ERROR.TOOL_FAILED, retryable: false,
                error: `The tool's ${what} was ${bytesText(run.bytes)} bytes, over the gateway's limit of ${bytesText(limit)} bytes per frame, so the page did not send it.`,
                detail: { bytes: run.bytes, limit },
            };
            run.bytes = frameLength(run.answer);
        }
        if (this.#link.write(run.answer)) run.sentOn = this.#link.conn();
    }
}

/**
 * Whether JSON.stringify would leave value out of its frame (a function, a
 * Symbol, a toJSON() that returns undefined: `return res.json` without the
 * call), which the gateway would refuse as a tool.result with no result.
 * @param {unknown} value
 */
function unsendable(value) {
    if (typeof value === "function" || typeof value === "symbol") return true;
    // @ts-ignore: any object may have a toJSON
    return value !== null && typeof value === "object" && typeof value.toJSON === "function" && JSON.stringify(value) === undefined;
}

/** @param {unknown} err */
function messageOf(err) {
    // new Error() says nothing: the gateway tells the model so (protocol.md).
    if (err instanceof Error) return err.message;
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
    const fields = { error: messageOf(err) };
    if (err && typeof err === "object") {
        if (typeof err.retryable === "boolean") fields.retryable = err.retryable;
        // A code set after the constructor checked it: one the gateway
        // would refuse is left out (tool_failed), so the answer still counts.
        if (err instanceof ToolError && typeof err.code === "string" && TOOL_CODES.has(err.code)) fields.code = err.code;
        if (err instanceof ToolError && err.detail !== undefined) fields.detail = err.detail;
    }
    return fields;
}
