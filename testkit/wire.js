/**
 * wire.js (test kit): a man in the middle of a page's WebSockets to the
 * gateway, for fault injection in end-to-end tests.
 *
 * attachWire(page) routes the page's sockets to `/ws` through Playwright's
 * page.routeWebSocket: each one still reaches the real gateway (from the
 * browser, with its cookie and origin), and the wire records every frame
 * both ways. A test then waits for a tool call by name, holds a tool's calls
 * back from the page and answers or fails them itself, delays or duplicates
 * the page's own answers, or drops or stalls the socket mid-call; the SDK
 * reconnects and resumes as it would after a real drop.
 *
 * Frames are "received" (the gateway sent them to the page) or "sent" (the
 * page sent them). Each socket has a number, 1 for the page's first.
 *
 * Exports: attachWire(page, options), Wire.
 *
 * @module testkit/wire
 */

/** @typedef {import("./index.js").WireFrame} WireFrame */

/**
 * Routes page's gateway sockets through a new Wire. Call it before the
 * page opens the gateway (before page.goto).
 * @param {import("@playwright/test").Page} page
 * @param {import("./index.js").WireOptions} [options]
 */
export async function attachWire(page, options = {}) {
    const wire = new Wire(options);
    await page.routeWebSocket(options.url ?? "**/ws", (ws) => wire.route(ws));
    return wire;
}

/**
 * @typedef {object} Socket
 * @property {number} n
 * @property {any} page    The page's side (a WebSocketRoute).
 * @property {any} server  The gateway's side.
 * @property {boolean} open
 * @property {boolean} opened  session.opened arrived on it.
 * @property {boolean} stalled  Nothing crosses it any more, and nothing closes it (stall).
 */

export class Wire {
    /** @type {WireFrame[]} */ #frames = [];
    /** @type {Socket[]} */ #sockets = [];
    /** @type {ToolCall[]} */ #calls = [];
    /** @type {Set<ToolCall>} */ #taken = new Set();
    /** @type {Set<() => void>} */ #waiters = new Set();
    /** @type {Set<string>} */ #held;
    /** @type {Map<string, number>} */ #delays = new Map();
    /** @type {Map<string, number>} */ #copies = new Map();
    #messageDelay = 0; // ms: the page's user messages reach the gateway this late
    #messageCopies = 1; // times each of the page's user messages reaches the gateway
    /** @type {Map<string, string>} */ #names = new Map(); // call id -> tool name
    #timeout;

    /** @param {import("./index.js").WireOptions} options */
    constructor(options) {
        this.#held = new Set(options.hold ?? []);
        this.#timeout = options.timeout ?? 10_000;
    }

    /** Playwright's route handler: one socket of the page. @param {any} ws */
    route(ws) {
        const server = ws.connectToServer();
        if (new URL(ws.url()).searchParams.get("testkit") === "replay") {
            return; // replay()'s socket, not the page's: passed through unrecorded
        }
        /** @type {Socket} */
        const sock = { n: this.#sockets.length + 1, page: ws, server, open: true, opened: false, stalled: false };
        this.#sockets.push(sock);
        ws.onMessage((/** @type {unknown} */ data) => this.#fromPage(sock, String(data)));
        server.onMessage((/** @type {unknown} */ data) => this.#fromGateway(sock, String(data)));
        ws.onClose((/** @type {number | undefined} */ code, /** @type {string | undefined} */ reason) => {
            sock.open = false;
            server.close({ code, reason });
            this.#wake();
        });
        server.onClose((/** @type {number | undefined} */ code, /** @type {string | undefined} */ reason) => {
            sock.open = false;
            ws.close({ code, reason });
            this.#wake();
        });
        this.#wake();
    }

    /** How many sockets the page has opened. */
    get sockets() {
        return this.#sockets.length;
    }

    /**
     * The frames so far, oldest first, optionally one direction's only.
     * @param {"received" | "sent"} [direction]
     */
    frames(direction) {
        return this.#frames.filter((f) => !direction || f.direction === direction);
    }

    /** The gateway's refusals of the page's frames: `error` frames without seq. */
    refusals() {
        return this.frames("received").map((f) => f.frame).filter((f) => f.type === "error" && typeof f.seq !== "number");
    }

    /** Holds the tool's calls back from the page from now on: the test answers them. @param {string} name */
    hold(name) {
        this.#held.add(name);
    }

    /** The page's answers to the tool's calls go to the gateway ms later. @param {string} name @param {number} ms */
    delayAnswers(name, ms) {
        this.#delays.set(name, ms);
    }

    /** Each answer of the page's to the tool's calls goes to the gateway `copies` times. @param {string} name */
    duplicateAnswers(name, copies = 2) {
        this.#copies.set(name, copies);
    }

    /**
     * The page's user messages (`message` frames) go to the gateway ms later
     * from now on (0: at once); one whose socket closes meanwhile is lost, as
     * on a network. @param {number} ms
     */
    delayMessages(ms) {
        this.#messageDelay = ms;
    }

    /** Each of the page's user messages goes to the gateway `copies` times. */
    duplicateMessages(copies = 2) {
        this.#messageCopies = copies;
    }

    /**
     * Resolves with the next tool.call of the tool that no earlier
     * toolCall() returned, including one that already arrived.
     * @param {string} name
     * @param {{timeout?: number}} [options]
     */
    async toolCall(name, options = {}) {
        const call = await this.#until(() => this.#calls.find((c) => c.name === name && !this.#taken.has(c)),
            `a tool.call of ${name}`, options.timeout);
        this.#taken.add(call);
        return call;
    }

    /**
     * Resolves with the first frame (past or future) that matches.
     * @param {(frame: any, wire: WireFrame) => boolean} match
     * @param {{direction?: "received" | "sent", timeout?: number}} [options]
     */
    async waitForFrame(match, options = {}) {
        const wf = await this.#until(() => this.#frames.find((f) => (!options.direction || f.direction === options.direction) && match(f.frame, f)),
            "a matching frame", options.timeout);
        return wf.frame;
    }

    /**
     * Drops the page's current socket mid-whatever: both sides are closed,
     * the gateway sees the page go, and the SDK reconnects after its backoff.
     * Resolves with the dropped socket's number.
     * @param {{code?: number, reason?: string}} [options]
     */
    async drop({ code = 3000, reason = "dropped by the test kit" } = {}) {
        const sock = this.#current();
        if (!sock) throw new Error("wire.drop: the page has no open socket to the gateway");
        sock.open = false;
        sock.server.close({ code: 1000, reason });
        sock.page.close({ code, reason });
        this.#wake();
        return sock.n;
    }

    /**
     * Stalls the page's current socket: from now on no frame crosses it
     * either way, and neither side is closed, as when a network path dies
     * without a word (Wi-Fi roaming, a NAT that forgot the connection).
     * Frames are still recorded. The SDK takes the socket for dead once a
     * frame the gateway always answers (a message, a tool's answer, an
     * approval, Stop while a turn runs) gets nothing back within its
     * answerTimeout, and reconnects. Resolves with the socket's number.
     */
    async stall() {
        const sock = this.#current();
        if (!sock) throw new Error("wire.stall: the page has no open socket to the gateway");
        sock.stalled = true;
        return sock.n;
    }

    /**
     * Resolves once a socket after the nth (default: the newest now) has its
     * session.opened: the page reconnected and resumed.
     * @param {{after?: number, timeout?: number}} [options]
     */
    async reconnected(options = {}) {
        const after = options.after ?? this.#sockets.length;
        await this.#until(() => this.#sockets.find((s) => s.n > after && s.opened), `a socket after #${after} with its session open`, options.timeout);
    }

    /**
     * Sends a frame to the gateway as the page, on its current socket.
     * @param {object} frame
     */
    send(frame) {
        const sock = this.#current();
        if (!sock) throw new Error(`wire.send: the page has no open socket to send ${JSON.stringify(frame)} on`);
        this.#record(sock, "sent", frame, true);
        sock.server.send(JSON.stringify(frame));
    }

    // --- internals ---

    /** The newest open socket whose session is open. */
    #current() {
        return this.#sockets.findLast((s) => s.open && s.opened) ?? null;
    }

    /** @param {Socket} sock @param {string} data */
    #fromGateway(sock, data) {
        const frame = parse(data);
        if (frame?.type === "session.opened") sock.opened = true;
        let forward = true;
        if (frame?.type === "tool.call" && typeof frame.id === "string") {
            this.#names.set(frame.id, frame.name);
            const held = this.#held.has(frame.name);
            forward = !held;
            this.#calls.push(new ToolCall(this, sock, frame, held));
        }
        this.#record(sock, "received", frame ?? unparsed(data), false);
        if (forward && sock.open && !sock.stalled) sock.page.send(data);
        this.#wake();
    }

    /** @param {Socket} sock @param {string} data */
    #fromPage(sock, data) {
        const frame = parse(data);
        this.#record(sock, "sent", frame ?? unparsed(data), false);
        const name = (frame?.type === "tool.result" || frame?.type === "tool.error") ? this.#names.get(frame.id) : undefined;
        const message = frame?.type === "message";
        const copies = message ? this.#messageCopies : (name && this.#copies.get(name)) || 1;
        const delay = message ? this.#messageDelay : (name && this.#delays.get(name)) || 0;
        const pass = () => {
            for (let i = 0; i < copies; i++) {
                // As on a real network: what a closed socket carried is lost.
                if (sock.open && !sock.stalled) sock.server.send(data);
            }
        };
        if (delay > 0) setTimeout(pass, delay);
        else pass();
        this.#wake();
    }

    /**
     * @param {Socket} sock @param {"received" | "sent"} direction
     * @param {any} frame @param {boolean} byTest
     */
    #record(sock, direction, frame, byTest) {
        this.#frames.push({ socket: sock.n, direction, frame, byTest });
    }

    /**
     * Polls found after every frame until it returns something.
     * @template T
     * @param {() => T | undefined | null} found
     * @param {string} what
     * @param {number} [timeout]
     * @returns {Promise<T>}
     */
    #until(found, what, timeout = this.#timeout) {
        const now = found();
        if (now) return Promise.resolve(now);
        return new Promise((resolve, reject) => {
            const check = () => {
                const v = found();
                if (!v) return;
                this.#waiters.delete(check);
                clearTimeout(timer);
                resolve(v);
            };
            const timer = setTimeout(() => {
                this.#waiters.delete(check);
                const none = this.#sockets.length === 0
                    ? " (no socket of the page came through the wire: attach it before page.goto, and check wireOptions.url)"
                    : "";
                reject(new Error(`wire: ${what} did not come within ${timeout} ms${none}; frames so far:\n${this.#summary()}`));
            }, timeout);
            this.#waiters.add(check);
        });
    }

    #wake() {
        for (const check of [...this.#waiters]) check();
    }

    #summary() {
        return this.#frames.slice(-30).map((f) => `  #${f.socket} ${f.direction === "sent" ? "->" : "<-"} ${JSON.stringify(f.frame).slice(0, 160)}`).join("\n");
    }

    /**
     * For ToolCall: sends on the current socket.
     * @param {object} frame
     */
    _answer(frame) {
        this.send(frame);
    }
}

/** A tool.call the gateway delivered to the page, as the wire saw it. */
export class ToolCall {
    #wire;
    #sock;
    #delivered;

    /** @param {Wire} wire @param {Socket} sock @param {any} frame @param {boolean} held */
    constructor(wire, sock, frame, held) {
        this.#wire = wire;
        this.#sock = sock;
        this.#delivered = !held;
        this.frame = frame;
        this.id = String(frame.id);
        this.name = String(frame.name);
        this.attempt = Number(frame.attempt);
        this.input = frame.input?.value;
        this.held = held;
        this.socket = sock.n;
    }

    /** Answers the call's attempt with result, as the page would (tool.result). @param {unknown} result */
    answer(result) {
        this.#wire._answer({ type: "tool.result", id: this.id, attempt: this.attempt, result: result === undefined ? null : result });
    }

    /**
     * Fails the call's attempt, as the page would (tool.error).
     * @param {string} error
     * @param {{retryable?: boolean, code?: string, detail?: unknown}} [options]
     */
    fail(error, options = {}) {
        this.#wire._answer({ type: "tool.error", id: this.id, attempt: this.attempt, error, ...options });
    }

    /** Hands a held call to the page after all, on the socket it came on. */
    deliver() {
        if (this.#delivered) return;
        if (!this.#sock.open) throw new Error(`wire: call ${this.id} came on socket #${this.#sock.n}, which is closed`);
        this.#delivered = true;
        this.#sock.page.send(JSON.stringify(this.frame));
    }
}

/** A text that is not a JSON object, as the wire records it. @param {string} raw */
function unparsed(raw) {
    return { type: "", raw };
}

/** @param {string} data */
function parse(data) {
    try {
        const f = JSON.parse(data);
        return f && typeof f === "object" && !Array.isArray(f) ? f : null;
    } catch {
        return null;
    }
}
