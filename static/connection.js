/**
 * connection.js: the WebSocket under a GatewayClient, reopened after every
 * unexpected close with capped exponential backoff and jitter.
 *
 * It knows nothing of sessions: the client says what to send when a socket
 * opens (`session.open`), what to do with each frame, and whether a close
 * should be retried (not after the session ended). The nth retry in a row
 * waits between half and all of min(maxDelay, initialDelay × factor^(n-1));
 * `connected()` (the session opened) resets the count, `retryNow()` (the
 * browser came back online) skips the wait.
 *
 * Exports:
 * - Connection: open(), write(frame), drop(), stop(), retryNow(), connected(), id.
 * - socketURL(url): a ws(s) URL from a relative or http(s) one.
 *
 * @module connection
 */

import { CLOSE } from "./codes.js";

/**
 * @typedef {{initialDelay: number, maxDelay: number, factor: number}} Backoff
 *
 * @typedef {object} ConnectionHooks
 * @property {() => void} open  The socket opened: send the first frame.
 * @property {(data: unknown) => void} frame  A frame arrived.
 * @property {(e: CloseEvent) => boolean} closed  The socket closed (not by
 *     drop or stop); true: reconnect.
 * @property {(state: "connecting" | "closed", extra?: {code?: number, retryIn?: number}) => void} state
 */

/** One socket at a time to url, reopened until stopped. */
export class Connection {
    /** @type {string} */ #url;
    /** @type {typeof WebSocket} */ #WS;
    /** @type {Backoff | false} */ #backoff;
    /** @type {ConnectionHooks} */ #hooks;

    /** @type {WebSocket | null} */ #ws = null;
    #id = 0; // increments per socket
    #retries = 0;
    /** @type {ReturnType<typeof setTimeout> | null} */ #retryTimer = null;
    #stopped = false;

    /**
     * @param {string} url  A ws(s) URL.
     * @param {typeof WebSocket} WS
     * @param {Backoff | false} backoff  false: never reconnect.
     * @param {ConnectionHooks} hooks
     */
    constructor(url, WS, backoff, hooks) {
        this.#url = url;
        this.#WS = WS;
        this.#backoff = backoff;
        this.#hooks = hooks;
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
        this.#hooks.state("connecting");
        ws.onopen = () => {
            if (ws === this.#ws) this.#hooks.open();
        };
        ws.onmessage = (e) => {
            if (ws === this.#ws) this.#hooks.frame(e.data);
        };
        ws.onclose = (e) => {
            if (ws === this.#ws) this.#onClose(e);
        };
    }

    /**
     * Sends frame as JSON if the socket is open.
     * @param {any} frame
     * @returns {boolean} whether it went out
     */
    write(frame) {
        const ws = this.#ws;
        if (!ws || ws.readyState !== 1) return false;
        ws.send(JSON.stringify(frame));
        return true;
    }

    /** Closes the current socket (1000) without reconnecting; open() starts another. */
    drop() {
        const ws = this.#ws;
        this.#ws = null;
        ws?.close(CLOSE.NORMAL);
    }

    /** Closes for good: no more sockets, no retries. */
    stop() {
        this.#stopped = true;
        this.#clearRetry();
        this.drop();
    }

    /** The session opened: the next failure starts the backoff over. */
    connected() {
        this.#retries = 0;
    }

    /** Retries at once if a retry is waiting (the browser is back online). */
    retryNow() {
        if (this.#retryTimer === null) return;
        this.#retries = 0;
        this.open();
    }

    /**
     * Any close but stop() or the session's end reconnects, whatever its
     * code: CLOSE.UNRESPONSIVE, TOO_SLOW, GOING_AWAY, a network drop.
     * @param {CloseEvent} e
     */
    #onClose(e) {
        this.#ws = null;
        const again = this.#hooks.closed(e);
        if (this.#stopped || !again || !this.#backoff) {
            this.#hooks.state("closed", { code: e.code });
            return;
        }
        const { initialDelay, maxDelay, factor } = this.#backoff;
        // Capped exponential backoff with equal jitter: half fixed, half random.
        const ceiling = Math.min(maxDelay, initialDelay * factor ** this.#retries);
        const delay = Math.round(ceiling / 2 + Math.random() * ceiling / 2);
        this.#retries++;
        this.#hooks.state("closed", { code: e.code, retryIn: delay });
        this.#retryTimer = setTimeout(() => this.open(), delay);
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
