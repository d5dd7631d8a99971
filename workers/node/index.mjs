// @clienttools/worker: serve a decide function to the gateway over HTTP.
//
// The gateway POSTs every trigger as {session, owner, trigger, proposed},
// signed with a shared secret; this module checks the signature, calls
// decide({ trigger, proposed, session, owner, parent, signal, deadline, traceparent }) and answers its
// decision as JSON. parent is set on a sub-agent's triggers; delegate()
// builds the tool.delegate decision that starts one (docs/subagents.md). It refuses replays: a tool.execute it has answered gets
// the same answer again without decide running twice, and any other request
// seen before is refused (replay.mjs). The protocol is described in
// docs/workers.md.
//
// Node 20 built-ins only; no dependencies.

import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";
import { DEFAULT_MAX_REPLAY_BYTES, DEFAULT_MAX_REPLAY_ENTRIES, REPLAY_MARGIN_MS, ReplayMemory } from "./replay.mjs";

export { ReplayMemory, DEFAULT_MAX_REPLAY_BYTES, DEFAULT_MAX_REPLAY_ENTRIES, REPLAY_MARGIN_MS };

/** Header names, lowercase as Node delivers them. */
export const HEADER_TIMESTAMP = "x-gateway-timestamp";
export const HEADER_SIGNATURE = "x-gateway-signature";
export const HEADER_DEADLINE = "x-gateway-deadline";

/** How far a request's timestamp may be from this clock, either way. */
export const DEFAULT_WINDOW_SECONDS = 300;

/** The largest request body accepted. */
export const DEFAULT_MAX_BODY_BYTES = 64 << 20;

/**
 * Idle keep-alive connections stay open this long. It is above the gateway's
 * idle timeout (30s by default), so the gateway closes an idle connection
 * first and never sends a request on one this side is closing.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

const SCHEME = "v1=";

/**
 * A request that is not correctly signed. `code` is one of "no_signature",
 * "bad_timestamp", "stale", "bad_signature".
 */
export class SignatureError extends Error {
    constructor(code, message) {
        super(message);
        this.name = "SignatureError";
        this.code = code;
    }
}

/**
 * The X-Gateway-Signature value for body sent at timestamp (unix seconds):
 * "v1=" and the hex HMAC-SHA256, keyed with secret, of
 * `${timestamp}.${body}`, the body as the exact bytes sent.
 *
 * @param {string | Buffer} secret
 * @param {number | string} timestamp
 * @param {string | Buffer} body
 */
export function sign(secret, timestamp, body) {
    return SCHEME + mac(secret, String(timestamp), body).toString("hex");
}

function mac(secret, timestamp, body) {
    return createHmac("sha256", secret).update(timestamp).update(".").update(body).digest();
}

/**
 * Checks a request's signature; throws a SignatureError when it is missing,
 * wrong, or signed more than windowSeconds away from now. The error never
 * contains the secret or the expected signature. Returns the signature that
 * matched, in lowercase hex: the request's identity (its timestamp and body),
 * however the header spelt it.
 *
 * @param {object} o
 * @param {string | Buffer} o.secret
 * @param {string | undefined} o.timestamp the X-Gateway-Timestamp header
 * @param {string | undefined} o.signature the X-Gateway-Signature header
 * @param {Buffer | string} o.body the raw request body
 * @param {number} [o.now] milliseconds since the epoch; default Date.now()
 * @param {number} [o.windowSeconds] default DEFAULT_WINDOW_SECONDS
 */
export function verify({ secret, timestamp, signature, body, now = Date.now(), windowSeconds = DEFAULT_WINDOW_SECONDS }) {
    checkSigned({ timestamp, signature, now, windowSeconds });
    timestamp = timestamp.trim();
    const want = mac(secret, timestamp, body);
    for (let entry of signature.trim().split(",")) {
        entry = entry.trim();
        if (!entry.startsWith(SCHEME)) continue;
        const hex = entry.slice(SCHEME.length);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== want.length * 2) continue;
        if (timingSafeEqual(Buffer.from(hex, "hex"), want)) return want.toString("hex");
    }
    throw new SignatureError("bad_signature",
        "signature does not match: check that the gateway and the worker share the same secret");
}

/**
 * checkSigned refuses a request whose signature headers are missing, or
 * whose timestamp is not fresh, before its body is read: a caller that
 * cannot sign makes the worker read nothing.
 */
function checkSigned({ timestamp, signature, now, windowSeconds }) {
    timestamp = (timestamp ?? "").trim();
    signature = (signature ?? "").trim();
    if (!timestamp || !signature) {
        const missing = [!timestamp && "X-Gateway-Timestamp", !signature && "X-Gateway-Signature"].filter(Boolean);
        throw new SignatureError("no_signature", `request is not signed: no ${missing.join(" or ")} header`);
    }
    if (!/^\d+$/.test(timestamp)) {
        throw new SignatureError("bad_timestamp", `bad signature timestamp: ${JSON.stringify(timestamp.slice(0, 32))}, want unix seconds`);
    }
    const skew = now / 1000 - Number(timestamp);
    if (Math.abs(skew) > windowSeconds) {
        throw new SignatureError("stale",
            `signature timestamp outside the replay window: signed ${Math.round(Math.abs(skew))}s ${skew > 0 ? "ago" : "in the future"}; the window is ${windowSeconds}s`);
    }
}

class HttpError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}

/**
 * A request listener, for node:http or any framework that passes Node's
 * (req, res), that serves decide over the gateway's protocol.
 *
 * Replays: a tool.execute is answered once per (session, trigger.id,
 * trigger.attempt): a repeat gets the same answer, and one that arrives
 * while decide still runs waits for it, so decide runs once. Any other
 * request whose signature was seen before is refused with 409. What is
 * remembered lasts the window plus REPLAY_MARGIN_MS (replay.mjs).
 *
 * @param {object} o
 * @param {(input: {trigger: object, proposed: object, session: string, owner?: string, parent?: object,
 *          signal: AbortSignal, deadline?: Date, traceparent?: string}) => object | Promise<object>} o.decide
 *        owner is who the session belongs to: the browser's id, or the
 *        person the gateway's Identify named (a tool that reads someone's
 *        data checks it is theirs)
 *        parent is set on a sub-agent's triggers: {id, name, attempt, depth},
 *        the call the sub-agent answers (docs/subagents.md)
 *        traceparent is the request's W3C trace context, when the gateway
 *        traces: start the worker's spans from it to join the trace
 * @param {string | Buffer} o.secret the secret shared with the gateway
 * @param {number} [o.windowSeconds] replay window; default 300
 * @param {number} [o.maxBodyBytes] default 64 MiB: a request carries the turn's tool results, each up to the gateway's limits, in its trigger and its proposed decision
 * @param {number} [o.maxReplayEntries] requests remembered; default 100,000
 * @param {number} [o.maxReplayBytes] bytes of answers remembered; default 64 MiB
 * @param {() => number} [o.now] the clock, in ms since the epoch; default Date.now (tests pass a fake)
 * @param {(err: Error, info: {trigger?: object}) => void} [o.onError]
 *        called for each error decide throws; default logs it to stderr
 */
export function createHandler({
    decide, secret, windowSeconds = DEFAULT_WINDOW_SECONDS, maxBodyBytes = DEFAULT_MAX_BODY_BYTES,
    maxReplayEntries = DEFAULT_MAX_REPLAY_ENTRIES, maxReplayBytes = DEFAULT_MAX_REPLAY_BYTES, now = Date.now, onError,
}) {
    if (typeof decide !== "function") {
        throw new TypeError("createHandler: decide must be a function");
    }
    if (!secret || secret.length === 0) {
        throw new TypeError("createHandler: secret is empty; the gateway signs every request with it");
    }
    onError ??= (err, { trigger }) =>
        console.error(`worker: decide failed on ${trigger?.type ?? "a request"}:`, err);
    const MAX_TIMER_MS = 2 ** 31 - 1;
    const memory = new ReplayMemory({
        ttlMs: windowSeconds * 1000 + REPLAY_MARGIN_MS, maxEntries: maxReplayEntries, maxBytes: maxReplayBytes, now,
    });

    /**
     * One call of decide, which one request or more wait for (a tool.execute
     * sent again while it runs joins it). Resolves to the answer,
     * {status, text}; never rejects. Its signal aborts at the deadline, or
     * once every request waiting for it has gone: the run is then
     * abandoned, and a failure it ends with is not the attempt's answer (the
     * gateway, restarted, sends the attempt again and means it to run).
     */
    function run(input, deadlineHeader, traceparent) {
        const { trigger } = input;
        const controller = new AbortController();
        let waiting = 0;
        let abandoned = false;
        let deadline;
        let timer;
        if (deadlineHeader) {
            const at = new Date(deadlineHeader);
            if (!Number.isNaN(at.getTime())) {
                deadline = at;
                // setTimeout holds at most 2^31-1 ms (24.8 days): a longer
                // wait is one timer after another.
                const arm = () => {
                    const left = at.getTime() - now();
                    timer = left > MAX_TIMER_MS
                        ? setTimeout(arm, MAX_TIMER_MS)
                        : setTimeout(() => controller.abort(new Error(`the deadline ${deadlineHeader} passed`)), Math.max(0, left));
                    timer.unref();
                };
                arm();
            }
        }
        const answer = (async () => {
            let decision;
            try {
                decision = await decide({
                    trigger,
                    proposed: isObject(input.proposed) ? input.proposed : {},
                    session: input.session,
                    owner: typeof input.owner === "string" ? input.owner : undefined,
                    parent: isObject(input.parent) ? input.parent : undefined,
                    signal: controller.signal,
                    deadline,
                    traceparent: typeof traceparent === "string" ? traceparent : undefined,
                });
            } catch (err) {
                onError(err, { trigger });
                return failure(500, err instanceof Error ? err.message : String(err));
            }
            if (!isObject(decision)) {
                return failure(500, `decide returned ${decision === null ? "null" : Array.isArray(decision) ? "an array" : typeof decision} ` +
                    `for a ${trigger.type} trigger; return a decision such as { actions: [...] }, or proposed to accept the engine's`);
            }
            try {
                return { status: 200, text: JSON.stringify(decision) };
            } catch (err) {
                return failure(500, `decide's decision for a ${trigger.type} trigger is not JSON: ${err.message}`);
            }
        })().finally(() => clearTimeout(timer));
        return {
            answer,
            get abandoned() { return abandoned; },
            /** A request waits for the answer; when the last one goes, decide's signal aborts. */
            join(request) {
                const gone = () => {
                    abandoned = true;
                    controller.abort(new Error("the gateway closed the request"));
                };
                if (request.gone) {
                    if (waiting === 0) gone(); // nobody waits for it
                } else {
                    waiting++;
                    request.onGone = () => {
                        if (--waiting === 0) gone();
                    };
                }
                return answer;
            },
        };
    }

    async function respond(req, request) {
        if (req.method !== "POST") {
            request.res.setHeader("Allow", "POST");
            throw new HttpError(405, `${req.method} is not allowed; the gateway POSTs triggers`);
        }
        const timestamp = req.headers[HEADER_TIMESTAMP];
        let body, signature;
        try {
            const signed = { windowSeconds, timestamp, signature: req.headers[HEADER_SIGNATURE], now: now() };
            checkSigned(signed); // before the body, which may be large
            body = await readBody(req, maxBodyBytes);
            signature = verify({ ...signed, secret, body });
        } catch (err) {
            if (err instanceof SignatureError) throw new HttpError(401, err.message);
            throw err;
        }
        const signedAt = Number(timestamp.trim()) * 1000;
        let input;
        try {
            input = JSON.parse(body.toString("utf8"));
        } catch (err) {
            throw new HttpError(400, `the body is not JSON: ${err.message}`);
        }
        const trigger = isObject(input) && isObject(input.trigger) ? input.trigger : undefined;
        request.trigger = trigger;

        const key = attemptKey(input);
        if (key) {
            const seen = memory.get(key);
            // A run every request left is not joined: decide runs anew.
            if (seen?.run && !seen.run.abandoned) return seen.run.join(request);
            if (seen?.answer) return seen.answer;
            if (seen && !seen.run) {
                throw new HttpError(409, `replayed request: attempt ${trigger.attempt} of call ${trigger.id} was answered already, ` +
                    "and its answer is no longer kept");
            }
            const r = run(input, req.headers[HEADER_DEADLINE], req.headers.traceparent);
            memory.start(key, r);
            // Recorded before any request reads the answer, so a repeat after
            // it finds it; not a failure of a run every request left, which
            // the attempt sent again (after a gateway's restart) runs anew.
            r.answer.then((answer) => {
                if (memory.get(key)?.run !== r) return; // a newer run has the key
                if (r.abandoned && answer.status !== 200) memory.forget(key);
                else memory.finish(key, answer, Buffer.byteLength(answer.text), signedAt);
            });
            return r.join(request);
        }
        if (!memory.see(`signature:${signature}`, signedAt)) {
            throw new HttpError(409, `replayed request: a request signed at ${timestamp.trim()} with this signature was answered already; ` +
                "the gateway signs every request anew");
        }
        if (!trigger || typeof trigger.type !== "string") {
            throw new HttpError(400, "the body is not {session, trigger, proposed}");
        }
        return run(input, req.headers[HEADER_DEADLINE], req.headers.traceparent).join(request);
    }

    return async function handle(req, res) {
        // The request, as the run that answers it sees it.
        const request = { res, gone: false, onGone: null, trigger: undefined };
        res.on("close", () => {
            if (res.writableFinished) return;
            request.gone = true;
            request.onGone?.();
        });
        let answer;
        try {
            answer = await respond(req, request);
        } catch (err) {
            if (!(err instanceof HttpError)) onError(err, { trigger: request.trigger });
            answer = failure(err instanceof HttpError ? err.status : 500, err.message);
        }
        send(res, answer.status, answer.text);
    };
}

/**
 * The decision that answers a tool.execute with a sub-agent: agent's model
 * and tools run, starting from message (default: the call's arguments), and
 * its final message is the call's result (docs/subagents.md).
 *
 * @param {{model: string, system?: string, tools?: object[], stream?: boolean, limits?: object}} agent
 * @param {{message?: string}} [o]
 * @returns {{actions: object[]}}
 */
export function delegate(agent, { message } = {}) {
    if (!isObject(agent) || typeof agent.model !== "string" || agent.model === "") {
        throw new TypeError("delegate: agent must be an agent config with a model");
    }
    const action = { type: "tool.delegate", agent };
    if (message !== undefined) action.message = message;
    return { actions: [action] };
}

/**
 * The key of a tool.execute's attempt, or undefined for any other request:
 * one attempt of one call runs once, whoever sends it. The tool's name and
 * arguments are part of it so that one call's answer never goes to another
 * (the engine never reuses a call id in a session; a test might): a replay,
 * and the gateway's own re-send, repeat them exactly.
 */
function attemptKey(input) {
    const trigger = isObject(input) ? input.trigger : undefined;
    if (!isObject(trigger) || trigger.type !== "tool.execute") return undefined;
    if (typeof input.session !== "string" || typeof trigger.id !== "string" || !Number.isInteger(trigger.attempt)) return undefined;
    return `attempt:${JSON.stringify([input.session, trigger.id, trigger.attempt, trigger.name, trigger.arguments])}`;
}

/** An error answer. */
function failure(status, message) {
    return { status, text: JSON.stringify({ error: message }) };
}

/**
 * Serves decide on host:port and resolves to the listening http.Server once
 * it accepts connections (port 0 picks a free port: read server.address()).
 *
 * @param {object} o the options of createHandler, and:
 * @param {number} [o.port] default 8787
 * @param {string} [o.host] default "127.0.0.1", this machine only; "0.0.0.0"
 *        to accept connections from other machines
 */
export function serve({ port = 8787, host = "127.0.0.1", ...options }) {
    const server = createServer(createHandler(options));
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
    return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
            server.off("error", reject);
            resolve(server);
        });
    });
}

/** The URL a listening server is reached at. */
export function serverURL(server) {
    const { address, port } = server.address();
    return `http://${address.includes(":") ? `[${address}]` : address}:${port}/`;
}

function isObject(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

function readBody(req, limit) {
    const length = Number(req.headers["content-length"]);
    if (length > limit) {
        req.resume();
        return Promise.reject(new HttpError(413, `the body is larger than ${limit} bytes`));
    }
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        req.on("data", (chunk) => {
            size += chunk.length;
            if (size > limit) {
                req.removeAllListeners("data");
                req.resume();
                reject(new HttpError(413, `the body is larger than ${limit} bytes`));
                return;
            }
            chunks.push(chunk);
        });
        req.on("end", () => resolve(Buffer.concat(chunks)));
        req.on("error", reject);
    });
}

function send(res, status, text) {
    if (res.headersSent || res.destroyed) return;
    if (status === 413) res.setHeader("Connection", "close");
    res.writeHead(status, {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": Buffer.byteLength(text),
    });
    res.end(text);
}
