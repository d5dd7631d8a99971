// @clienttools/worker: serve a decide function to the gateway over HTTP.
//
// The gateway POSTs every trigger as {session, trigger, proposed}, signed
// with a shared secret; this module checks the signature, calls
// decide({ trigger, proposed, session, signal, deadline }) and answers its
// decision as JSON. The protocol is described in docs/workers.md.
//
// Node 20 built-ins only; no dependencies.

import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";

/** Header names, lowercase as Node delivers them. */
export const HEADER_TIMESTAMP = "x-gateway-timestamp";
export const HEADER_SIGNATURE = "x-gateway-signature";
export const HEADER_DEADLINE = "x-gateway-deadline";

/** How far a request's timestamp may be from this clock, either way. */
export const DEFAULT_WINDOW_SECONDS = 300;

/** The largest request body accepted. */
export const DEFAULT_MAX_BODY_BYTES = 4 << 20;

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
 * contains the secret or the expected signature.
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
            `signature timestamp outside the replay window: signed ${Math.round(skew)}s from now; the window is ${windowSeconds}s`);
    }
    const want = mac(secret, timestamp, body);
    for (let entry of signature.split(",")) {
        entry = entry.trim();
        if (!entry.startsWith(SCHEME)) continue;
        const hex = entry.slice(SCHEME.length);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== want.length * 2) continue;
        if (timingSafeEqual(Buffer.from(hex, "hex"), want)) return;
    }
    throw new SignatureError("bad_signature",
        "signature does not match: check that the gateway and the worker share the same secret");
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
 * @param {object} o
 * @param {(input: {trigger: object, proposed: object, session: string,
 *          signal: AbortSignal, deadline?: Date}) => object | Promise<object>} o.decide
 * @param {string | Buffer} o.secret the secret shared with the gateway
 * @param {number} [o.windowSeconds] replay window; default 300
 * @param {number} [o.maxBodyBytes] default 4 MiB
 * @param {(err: Error, info: {trigger?: object}) => void} [o.onError]
 *        called for each error decide throws; default logs it to stderr
 */
export function createHandler({ decide, secret, windowSeconds = DEFAULT_WINDOW_SECONDS, maxBodyBytes = DEFAULT_MAX_BODY_BYTES, onError }) {
    if (typeof decide !== "function") {
        throw new TypeError("createHandler: decide must be a function");
    }
    if (!secret || secret.length === 0) {
        throw new TypeError("createHandler: secret is empty; the gateway signs every request with it");
    }
    onError ??= (err, { trigger }) =>
        console.error(`worker: decide failed on ${trigger?.type ?? "a request"}:`, err);

    return async function handle(req, res) {
        let trigger;
        const controller = new AbortController();
        let timer;
        res.on("close", () => {
            clearTimeout(timer);
            if (!res.writableFinished) controller.abort(new Error("the gateway closed the request"));
        });
        try {
            if (req.method !== "POST") {
                res.setHeader("Allow", "POST");
                throw new HttpError(405, `${req.method} is not allowed; the gateway POSTs triggers`);
            }
            const body = await readBody(req, maxBodyBytes);
            try {
                verify({
                    secret, body, windowSeconds,
                    timestamp: req.headers[HEADER_TIMESTAMP],
                    signature: req.headers[HEADER_SIGNATURE],
                });
            } catch (err) {
                if (err instanceof SignatureError) throw new HttpError(401, err.message);
                throw err;
            }
            let input;
            try {
                input = JSON.parse(body.toString("utf8"));
            } catch (err) {
                throw new HttpError(400, `the body is not JSON: ${err.message}`);
            }
            if (!isObject(input) || !isObject(input.trigger) || typeof input.trigger.type !== "string") {
                throw new HttpError(400, "the body is not {session, trigger, proposed}");
            }
            trigger = input.trigger;

            let deadline;
            const header = req.headers[HEADER_DEADLINE];
            if (header) {
                const at = new Date(header);
                if (!Number.isNaN(at.getTime())) {
                    deadline = at;
                    timer = setTimeout(() => controller.abort(new Error(`the deadline ${header} passed`)),
                        Math.max(0, at.getTime() - Date.now()));
                    timer.unref();
                }
            }

            let decision;
            try {
                decision = await decide({
                    trigger,
                    proposed: isObject(input.proposed) ? input.proposed : {},
                    session: input.session,
                    signal: controller.signal,
                    deadline,
                });
            } catch (err) {
                onError(err, { trigger });
                throw new HttpError(500, err instanceof Error ? err.message : String(err));
            }
            if (!isObject(decision)) {
                throw new HttpError(500, `decide returned ${decision === null ? "null" : Array.isArray(decision) ? "an array" : typeof decision} ` +
                    `for a ${trigger.type} trigger; return a decision such as { actions: [...] }, or proposed to accept the engine's`);
            }
            let text;
            try {
                text = JSON.stringify(decision);
            } catch (err) {
                throw new HttpError(500, `decide's decision for a ${trigger.type} trigger is not JSON: ${err.message}`);
            }
            send(res, 200, text);
        } catch (err) {
            const status = err instanceof HttpError ? err.status : 500;
            if (!(err instanceof HttpError)) onError(err, { trigger });
            send(res, status, JSON.stringify({ error: err.message }));
        }
    };
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
