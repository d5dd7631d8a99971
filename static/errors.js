/**
 * errors.js words the session's failures for the chat page's reader: a short
 * sentence, never infrastructure detail (a resolver's address, a URL, a Go
 * error chain). The full text goes to the console, for whoever debugs.
 *
 * Exports: modelErrorText(error), retryingText(error, next, attempts),
 * sessionErrorText(code, message).
 *
 * @module errors
 */

import { SESSION_ERROR } from "./codes.js";

/** Said for any failure that looks like the network, not the provider. */
export const UNREACHABLE = "The model could not be reached.";

// Failures of the way to the provider: DNS, TCP, TLS, a cut stream, a timeout.
const TRANSPORT = /\b(?:dial|lookup|no such host|connection (?:refused|reset)|network is unreachable|i\/o timeout|tls|x509|certificate|EOF|broken pipe|deadline exceeded|timeout|stream cut off|proxyconnect)\b/i;
// Anything that looks like an address, which the reader has no use for.
// An IPv6 one in brackets has two colons at least: "[3]" is an index.
const ADDRESS = /\bhttps?:\/\/\S+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?|\[[0-9a-f]*:[0-9a-f]*:[0-9a-f:]*\](?::\d+)?/gi;
const MAX = 120;
// "anthropic: status 429: ...": the provider answered.
const STATUS = /^\s*[\w.-]+:\s*status (\d{3}):\s*([\s\S]*)$/;

/**
 * A model failure (model.finished's error) in words.
 * @param {string} error  The gateway's text: "provider: status 529: Overloaded".
 */
export function modelErrorText(error) {
    const text = String(error ?? "");
    const m = STATUS.exec(text);
    if (!m) return TRANSPORT.test(text) || new RegExp(ADDRESS.source, "i").test(text) ? UNREACHABLE : `The model failed: ${short(text.replace(/^\s*[\w.-]+:\s*/, ""))}`;
    const status = Number(m[1]);
    if (status === 401 || status === 403) return "The model's provider refused the gateway's key.";
    if (status === 429) return "The model's provider is rate limiting the gateway. Try again in a moment.";
    const said = short(m[2]);
    if (status >= 500) return `The model's provider is having trouble${said ? `: ${said}` : "."}`;
    return `The model failed${said ? `: ${said}` : "."}`;
}

/**
 * What the "Thinking…" line says while the model's request waits to go
 * again (model.retrying): why, and that it goes again on its own.
 * @param {string} error  The failure, as model.finished would say it.
 * @param {number} next  The attempt that follows.
 * @param {number} attempts  The most the turn makes.
 */
export function retryingText(error, next, attempts) {
    const text = String(error ?? "");
    const status = Number(STATUS.exec(text)?.[1] ?? 0);
    // A streamed error has no status: "anthropic: stream cut off mid-turn: Overloaded".
    const why = status === 429 || /rate.?limit/i.test(text) ? "The model's provider is rate limiting the gateway"
        : status >= 500 || /overload|unavailable|server error|api_error/i.test(text) ? "The model's provider is busy"
        : TRANSPORT.test(text) ? "The model could not be reached"
        : "The model's request failed";
    return `${why}: trying again (attempt ${next} of ${attempts})…`;
}

const SESSION_TEXT = {
    [SESSION_ERROR.WORKER_FAILED]: "The agent's worker failed on the last step.",
    [SESSION_ERROR.BAD_DECISION]: "The agent's worker asked for something the gateway could not do.",
    [SESSION_ERROR.BAD_CONFIG]: "The agent's new settings could not be used; the old ones stay.",
};

/**
 * A session error event (not model_failed: model.finished says that one) in words.
 * @param {string} code
 */
export function sessionErrorText(code) {
    return SESSION_TEXT[code] ?? "Something went wrong in the session.";
}

/**
 * The first line of a provider's words, without addresses, at most MAX
 * characters, ending with a full stop.
 * @param {string} s
 */
function short(s) {
    let t = s.split("\n")[0].replace(ADDRESS, "").replace(/\s+/g, " ").trim();
    if (t.length > MAX) t = `${t.slice(0, MAX - 1).trimEnd()}…`;
    return t && !/[.!?…]$/.test(t) ? `${t}.` : t;
}
