/**
 * errors.js words the session's failures for the chat page's reader: a short
 * sentence, never infrastructure detail (a resolver's address, a URL, a Go
 * error chain). The full text goes to the console, for whoever debugs.
 *
 * Exports: modelErrorText(error), retryHelps(error),
 * retryingText(error, next, attempts), sessionErrorText(code, message).
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
// ADDRESS without its g flag, whose lastIndex would carry from one test to the next.
const HAS_ADDRESS = new RegExp(ADDRESS.source, "i");
const MAX = 120;
// "anthropic: status 429: ...": the provider answered.
const STATUS = /^\s*[\w.-]+:\s*status (\d{3}):\s*([\s\S]*)$/;
// The gateway's words for a prompt longer than the model's context window
// (model.ErrTooLong): the same chat fails again.
const TOO_LONG = /the chat is longer than the model can read/i;

/**
 * What a model failure is, from the gateway's text: `key` (refused the
 * gateway's key), `rate` (a rate limit), `busy` (an overload or a server
 * error), `unreachable` (the network, a cut stream) or `other`, with the
 * provider's own words. A streamed error has no status ("anthropic: stream
 * cut off mid-turn: Overloaded"): its words say what it is.
 * @param {string} text
 * @returns {{kind: "key" | "rate" | "busy" | "unreachable" | "other", said: string}}
 */
function failure(text) {
    const m = STATUS.exec(text);
    if (m) {
        const status = Number(m[1]);
        const kind = status === 401 || status === 403 ? "key" : status === 429 ? "rate" : status >= 500 ? "busy" : "other";
        return { kind, said: m[2] };
    }
    const said = text.replace(/^\s*[\w.-]+:\s*/, "");
    if (/rate.?limit/i.test(text)) return { kind: "rate", said };
    if (/overload|unavailable|server error|api_error/i.test(text)) return { kind: "busy", said: said.replace(/^stream cut off mid-turn:\s*/, "") };
    if (TRANSPORT.test(text) || HAS_ADDRESS.test(text)) return { kind: "unreachable", said };
    return { kind: "other", said };
}

/**
 * A model failure (model.finished's error) in words.
 * @param {string} error  The gateway's text: "provider: status 529: Overloaded".
 */
export function modelErrorText(error) {
    if (!retryHelps(error)) return "This chat is longer than the model can read: start a new chat.";
    const { kind, said } = failure(String(error ?? ""));
    const words = short(said);
    switch (kind) {
        case "key": return "The model's provider refused the gateway's key.";
        case "rate": return "The model's provider is rate limiting the gateway. Try again in a moment.";
        case "busy": return `The model's provider is having trouble${words ? `: ${words}` : "."}`;
        case "unreachable": return UNREACHABLE;
    }
    return `The model failed${words ? `: ${words}` : "."}`;
}

/**
 * Whether sending the message again may help: not for a chat longer than
 * the model reads, whose every turn fails the same way.
 * @param {string} error  The gateway's text.
 */
export function retryHelps(error) {
    return !TOO_LONG.test(String(error ?? ""));
}

/**
 * What the "Thinking…" line says while the model's request waits to go
 * again (model.retrying): why, and that it goes again on its own.
 * @param {string} error  The failure, as model.finished would say it.
 * @param {number} next  The attempt that follows.
 * @param {number} attempts  The most the turn makes.
 */
export function retryingText(error, next, attempts) {
    const why = {
        key: "The model's provider refused the gateway's key",
        rate: "The model's provider is rate limiting the gateway",
        busy: "The model's provider is busy",
        unreachable: "The model could not be reached",
        other: "The model's request failed",
    }[failure(String(error ?? "")).kind];
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
 * What session.ended says, by its reason: a deleted chat (DELETE
 * /sessions/{id}, from this tab or another) in words, any other as it comes.
 * @param {string | undefined} reason
 */
export function endedText(reason) {
    if (reason === "deleted") return "This chat was deleted. Start a new chat to go on.";
    return reason ? `The conversation ended: ${reason}` : "The conversation ended.";
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
