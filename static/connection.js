/**
 * connection.js: the WebSocket under a GatewayClient, reopened after every
 * unexpected close with capped exponential backoff and jitter, and the
 * gateway's limits on what goes on it.
 *
 * It knows nothing of sessions: the client says what to send when a socket
 * opens (`session.open`), what to do with each frame, and whether a close
 * should be retried (not after the session ended). The nth retry in a row
 * waits between half and all of min(maxDelay, initialDelay × factor^(n-1));
 * `connected()` (the session opened) resets the count, `retryNow()` (the
 * browser came back online) skips the wait.
 *
 * A socket can die without closing (a network path dropped: Wi-Fi roaming,
 * a NAT or proxy that forgot the flow): the browser says nothing, and only
 * the gateway pings. So a frame the gateway always answers (written with
 * `answered`: answerWait) arms a watch: when no frame at all arrives within
 * `answerTimeout` ms, the socket is taken for dead, let go, and another
 * opened after the backoff, as after a close with 1006. A frame may ask
 * for longer (session.open: OPEN_ANSWER_MS). A socket that has been silent
 * for PROBE_SILENCE_MS is asked for a pong (a `ping`, watched the same way)
 * when the machine wakes from a sleep (a look at the clock comes late), the
 * browser comes back online, or the tab is shown again (watchWake): a live
 * one answers, a dead one is found without waiting for the user to send.
 *
 * The gateway reads frames of at most `frameBytes` (a larger one makes it
 * close the socket with 1009, and the page would send it again after every
 * reconnect) and takes messages of at most `messageBytes` of UTF-8. It says
 * both in session.opened (`limits`); until then the defaults hold. The SDK
 * measures what it sends against them and refuses, with a LimitError, what
 * the gateway would refuse, so nothing is lost on the way.
 *
 * Exports:
 * - Connection: open(), write(frame), drop(), retryLater(), stop(), retryNow(),
 *   connected(), probe(), watchWake(), id.
 * - PROBE_SILENCE_MS: how long a socket is silent before a wake probes it.
 * - socketURL(url): a ws(s) URL from a relative or http(s) one.
 * - OPEN_ANSWER_MS: how long a session.open's answer may take at least;
 *   answerWait(frame, running): which frames the gateway always answers.
 * - DEFAULT_LIMITS, readLimits(limits, previous): the gateway's limits.
 * - LimitError, messageOverLimits(frame, limits), frameLength(frame),
 *   byteLength(text), bytesText(n): measuring against them.
 *
 * @module connection
 */

import { CLOSE, FRAME_ERROR } from "./codes.js";

/**
 * @typedef {{initialDelay: number, maxDelay: number, factor: number}} Backoff
 *     In ms; defaults 250, 10000, 2.
 *
 * @typedef {number | false} AnswerTimeout  In ms; false: no watch.
 *
 * @typedef {{frameBytes: number, messageBytes: number}} Limits  In bytes;
 *     frameBytes is Infinity when the gateway's transport has no limit.
 *
 * @typedef {object} ConnectionHooks
 * @property {() => void} open  The socket opened: send the first frame.
 * @property {(data: unknown) => void} frame  A frame arrived.
 * @property {(e: CloseEvent) => boolean} closed  The socket closed (not by
 *     drop or stop); true: reconnect.
 * @property {(state: "connecting" | "closed", extra?: {code?: number, reason?: string, retryIn?: number}) => void} state
 */

/**
 * How long a socket has been silent (ms) before a wake, a return online or
 * the tab shown again probes it: one that just brought a frame is alive.
 */
export const PROBE_SILENCE_MS = 10_000;

/**
 * The wake watch looks at the clock every WAKE_TICK_MS; a look that comes
 * WAKE_GAP_MS after the last or later says the machine slept (or the tab
 * was frozen, or throttled in the background: a probe costs one frame).
 */
const WAKE_TICK_MS = 5_000, WAKE_GAP_MS = 20_000;

/** One socket at a time to url, reopened until stopped. */
export class Connection {
    /** @type {string} */ #url;
    /** @type {typeof WebSocket} */ #WS;
    /** @type {Backoff | false} */ #backoff;
    /** @type {ConnectionHooks} */ #hooks;
    /** @type {AnswerTimeout} */ #answerTimeout;
    /** @type {ReturnType<typeof setTimeout> | null} */ #answerTimer = null;

    /** @type {WebSocket | null} */ #ws = null;
    #id = 0; // increments per socket
    #retries = 0;
    /** @type {ReturnType<typeof setTimeout> | null} */ #retryTimer = null;
    #stopped = false;
    #heard = 0; // Date.now() of the current socket's last frame
    #pinging = false; // a ping is out on the current socket, no frame since
    #live = false; // the current socket's session opened: the gateway takes a ping
    /** @type {ReturnType<typeof setInterval> | null} */ #wakeTimer = null;

    /**
     * @param {string} url  A ws(s) URL.
     * @param {typeof WebSocket} WS
     * @param {Partial<Backoff> | false} backoff  false: never reconnect.
     * @param {ConnectionHooks} hooks
     * @param {AnswerTimeout} [answerTimeout]  Default 15000.
     */
    constructor(url, WS, backoff, hooks, answerTimeout = 15_000) {
        this.#url = url;
        this.#WS = WS;
        this.#backoff = backoff && {
            initialDelay: backoff.initialDelay ?? 250,
            maxDelay: backoff.maxDelay ?? 10_000,
            factor: backoff.factor ?? 2,
        };
        this.#hooks = hooks;
        this.#answerTimeout = answerTimeout;
    }

    /** The current socket's number: 1 for the first, 2 after a reconnect, ... */
    get id() {
        return this.#id;
    }

    /** Opens a new socket now. */
    open() {
        if (this.#stopped || !this.#WS) return;
        this.#clearRetry();
        const ws = new this.#WS(this.#url);
        this.#id++;
        this.#ws = ws;
        this.#live = this.#pinging = false;
        this.#hooks.state("connecting");
        ws.onopen = () => {
            if (ws === this.#ws) this.#hooks.open();
        };
        ws.onmessage = (e) => {
            if (ws !== this.#ws) return;
            this.#heard = Date.now();
            this.#pinging = false;
            this.#clearAnswer();
            this.#hooks.frame(e.data);
        };
        ws.onclose = (e) => {
            if (ws === this.#ws) this.#onClose(e);
        };
    }

    /**
     * Sends frame as JSON if the socket is open.
     * @param {any} frame
     * @param {boolean | number} [answered]  The gateway always answers it
     *     (answerWait): no frame within answerTimeout means the socket is
     *     dead. A number: within that many ms at least.
     * @returns {boolean} whether it went out
     */
    write(frame, answered = false) {
        const ws = this.#ws;
        if (!ws || ws.readyState !== 1) return false;
        ws.send(JSON.stringify(frame));
        if (answered !== false && this.#answerTimeout !== false && this.#answerTimer === null) {
            const timeout = typeof answered === "number" ? Math.max(answered, this.#answerTimeout) : this.#answerTimeout;
            const heard = this.#heard;
            this.#answerTimer = setTimeout(() => {
                // One turn more for a frame that came as the tab was frozen:
                // its message event may wait behind this timer.
                this.#answerTimer = setTimeout(() => {
                    this.#answerTimer = null;
                    if (ws !== this.#ws || this.#heard !== heard) return;
                    this.#ws = null; // its close, whenever the browser gives up on it, is not ours
                    ws.close(CLOSE.NORMAL);
                    this.#onClose(/** @type {CloseEvent} */ ({ code: 1006, reason: `no answer from the gateway in ${timeout} ms`, wasClean: false }));
                }, 0);
            }, timeout);
        }
        return true;
    }

    /** Closes the current socket (1000) without reconnecting; open() starts another. */
    drop() {
        const ws = this.#ws;
        this.#ws = null;
        this.#clearAnswer();
        ws?.close(CLOSE.NORMAL);
    }

    /** Closes the current socket (1000) and opens another after the backoff, as after a drop. */
    retryLater() {
        this.#ws?.close(CLOSE.NORMAL);
    }

    /** Closes for good: no more sockets, no retries. */
    stop() {
        this.#stopped = true;
        if (this.#wakeTimer !== null) clearInterval(this.#wakeTimer);
        this.#clearRetry();
        this.drop();
    }

    /** The session opened: the next failure starts the backoff over. */
    connected() {
        this.#retries = 0;
        this.#live = true;
    }

    /** Retries at once if a retry is waiting (the browser is back online); else probes the socket. */
    retryNow() {
        if (this.#retryTimer === null) return this.probe();
        this.#retries = 0;
        this.open();
    }

    /**
     * Sends a ping, which the gateway answers with a pong, when the socket's
     * session is open and the socket has been silent for PROBE_SILENCE_MS:
     * no frame back within answerTimeout, and it is let go as a dead one.
     */
    probe() {
        if (this.#answerTimeout === false || !this.#live || this.#stopped || this.#pinging || Date.now() - this.#heard < PROBE_SILENCE_MS) return;
        this.#pinging = this.write({ type: "ping" }, true); // one at a time: a wake also fires online and visibilitychange
    }

    /**
     * Probes the socket when the machine wakes from a sleep or the tab is
     * shown again, and retries at once (or probes) when the browser comes
     * back online; until stop(). @param {typeof globalThis} scope
     */
    watchWake(scope) {
        if (typeof scope.addEventListener !== "function" || this.#wakeTimer !== null) return;
        scope.addEventListener("online", () => this.retryNow());
        scope.document?.addEventListener("visibilitychange", () => {
            if (scope.document.visibilityState === "visible") this.probe();
        });
        let last = Date.now();
        this.#wakeTimer = setInterval(() => {
            const now = Date.now();
            // A hidden tab's late tick is its timers throttled, not a sleep:
            // visibilitychange probes it once it shows.
            if (now - last >= WAKE_GAP_MS && !scope.document?.hidden) this.probe();
            last = now;
        }, WAKE_TICK_MS);
    }

    /**
     * Any close but stop() or the session's end reconnects, whatever its
     * code: CLOSE.UNRESPONSIVE, TOO_SLOW, GOING_AWAY, a network drop.
     * @param {CloseEvent} e
     */
    #onClose(e) {
        this.#ws = null;
        this.#clearAnswer();
        // A refused origin stays refused: retrying would only knock again.
        const again = this.#hooks.closed(e) && e.code !== CLOSE.FORBIDDEN;
        if (this.#stopped || !again || !this.#backoff) {
            this.#hooks.state("closed", { code: e.code, reason: e.reason });
            return;
        }
        const { initialDelay, maxDelay, factor } = this.#backoff;
        // Capped exponential backoff with equal jitter: half fixed, half random.
        const ceiling = Math.min(maxDelay, initialDelay * factor ** this.#retries);
        const delay = Math.round(ceiling / 2 + Math.random() * ceiling / 2);
        this.#retries++;
        this.#hooks.state("closed", { code: e.code, reason: e.reason, retryIn: delay });
        this.#retryTimer = setTimeout(() => this.open(), delay);
    }

    #clearAnswer() {
        if (this.#answerTimer !== null) clearTimeout(this.#answerTimer);
        this.#answerTimer = null;
    }

    #clearRetry() {
        if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
        this.#retryTimer = null;
    }
}

/** @param {string} url */
export function socketURL(url) {
    const base = typeof location === "object" ? location.href : undefined;
    const u = new URL(url, base);
    if (u.protocol === "http:") u.protocol = "ws:";
    if (u.protocol === "https:") u.protocol = "wss:";
    return u.href;
}

/**
 * How long a session.open's answer may take at least (ms): the gateway
 * answers it once the worker has decided what it waits for (a new
 * session's session.start; a message's trigger, for a session that is
 * deciding one), each up to a minute (the engine's DecideTimeout), and the
 * socket it goes on has just opened, so is seldom dead already.
 */
export const OPEN_ANSWER_MS = 65_000;

/** The frames the gateway always answers, at once or once a worker decided. */
const ANSWERED = new Set(["message", "tool.result", "tool.error", "tool.approve"]);

/**
 * Whether the gateway always answers frame, and how long it may take at
 * least (write's `answered`): a session.open (session.opened, or an error)
 * within OPEN_ANSWER_MS; a message (message.taken), a tool's answer
 * (tool.finished or tool.retrying, or an error for one too late), an
 * approval (tool.approved, or an error) and Stop while a turn runs (the
 * turn's end) within answerTimeout. A dead socket under any of them is
 * found; a tool.progress, or Stop with nothing running, may get nothing.
 * @param {{type: string}} frame
 * @param {boolean} running  a turn runs (the last event is not session.idle)
 * @returns {boolean | number}
 */
export function answerWait(frame, running) {
    if (frame.type === "session.open") return OPEN_ANSWER_MS;
    return ANSWERED.has(frame.type) || (frame.type === "cancel" && running);
}

/**
 * The gateway's limits until its session.opened says otherwise: its
 * defaults, --read-limit (1 MiB) and --max-message (256 KiB).
 * @type {Readonly<Limits>}
 */
export const DEFAULT_LIMITS = Object.freeze({ frameBytes: 1 << 20, messageBytes: 256 << 10 });

/**
 * The limits of session.opened's `limits`. A gateway that sends none keeps
 * the previous ones; frameBytes absent means its transport has no limit.
 * @param {any} limits
 * @param {Readonly<Limits>} previous
 * @returns {Readonly<Limits>}
 */
export function readLimits(limits, previous) {
    if (!limits || typeof limits !== "object") return previous;
    const positive = (/** @type {unknown} */ n) => typeof n === "number" && n > 0;
    return Object.freeze({
        frameBytes: positive(limits.frameBytes) ? limits.frameBytes : Infinity,
        messageBytes: positive(limits.messageBytes) ? limits.messageBytes : previous.messageBytes,
    });
}

/**
 * Something over the gateway's limits, never sent: `code` is
 * FRAME_ERROR.LIMIT_EXCEEDED, as the gateway's own refusal, and the message
 * names the size and the limit for a person to read.
 */
export class LimitError extends Error {
    /** @param {string} message @param {number} bytes @param {number} limit */
    constructor(message, bytes, limit) {
        super(message);
        this.name = "LimitError";
        this.code = FRAME_ERROR.LIMIT_EXCEEDED;
        /** How large it is, in bytes. */
        this.bytes = bytes;
        /** The limit it is over, in bytes. */
        this.limit = limit;
    }
}

/**
 * The LimitError for a `message` frame the gateway would refuse (content
 * over messageBytes: limit_exceeded; the frame over frameBytes: a close
 * with 1009), or null when it fits.
 * @param {{content: string}} frame
 * @param {Readonly<Limits>} limits
 */
export function messageOverLimits(frame, limits) {
    const bytes = byteLength(frame.content);
    if (bytes > limits.messageBytes) {
        return new LimitError(`The message is ${bytesText(bytes)} bytes; the gateway takes at most ${bytesText(limits.messageBytes)}.`,
            bytes, limits.messageBytes);
    }
    // JSON escapes can make a frame much longer than its text (a control
    // character takes six bytes).
    const size = frameLength(frame);
    if (size > limits.frameBytes) {
        return new LimitError(`The message takes ${bytesText(size)} bytes to send; the gateway reads at most ${bytesText(limits.frameBytes)} at once.`,
            size, limits.frameBytes);
    }
    return null;
}

const encoder = new TextEncoder();

/** How many bytes frame takes on the wire: its JSON in UTF-8. @param {any} frame */
export function frameLength(frame) {
    return byteLength(JSON.stringify(frame) ?? "");
}

/** text's length in UTF-8, as the gateway counts it. @param {string} text */
export function byteLength(text) {
    return encoder.encode(text).length;
}

/** A byte count for reading: 2000000 is "2,000,000". @param {number} n */
export function bytesText(n) {
    return n.toLocaleString("en-US");
}
