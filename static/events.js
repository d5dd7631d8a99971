/**
 * events.js: what the client emits for a session event. The gateway's
 * events (docs/protocol.md) become the client's few (docs/sdk.md#events):
 * `message`, `delta`, `model.retrying`, `model.finished`, `discarded`,
 * `idle`, `guard`, `client.event`, `error` and `ended`, each with its seq
 * and `replayed`.
 *
 * A sub-agent's event (one with `parent`: the call the sub-agent answers,
 * docs/subagents.md) is never one of those: its text is not the
 * assistant's, and its end is not the session's. It is emitted as
 * `subagent` ({seq, parent, type, event, replayed}); the tool cards show it
 * (cards.js).
 *
 * Exports: clientEvent(f, replayed), parentOf(f), jsonValue(text).
 *
 * @module events
 */

/**
 * The call whose sub-agent published f; null for the session's own agent.
 * @param {any} f
 * @returns {string | null}
 */
export function parentOf(f) {
    return typeof f?.parent === "string" && f.parent ? f.parent : null;
}

/**
 * The client event for the session event f: [name, detail], or null when
 * there is none (tool events change cards instead).
 * @param {any} f  A session event (it has a seq).
 * @param {boolean} replayed
 * @returns {[string, object] | null}
 */
export function clientEvent(f, replayed) {
    const { seq } = f;
    const parent = parentOf(f);
    if (parent) return ["subagent", { seq, parent, type: f.type, event: f, replayed }];
    switch (f.type) {
        case "message": return ["message", { seq, message: f.message ?? {}, replayed }];
        case "model.delta": return ["delta", { seq, text: f.text ?? "", replayed }];
        case "model.finished":
            return ["model.finished", { seq, stopReason: f.stopReason, usage: f.usage, error: f.error, replayed }];
        case "model.discarded": return ["discarded", { seq, reason: f.reason ?? "", replayed }];
        case "model.retrying":
            return ["model.retrying", { seq, attempt: f.attempt, attempts: f.attempts, error: String(f.error ?? ""), backoff: String(f.backoff ?? ""), replayed }];
        case "session.idle": return ["idle", { seq, replayed }];
        case "guard.tripped": return ["guard", { ...f, seq, message: String(f.message ?? ""), replayed }];
        case "client.event": return ["client.event", { seq, name: f.name, data: f.data, replayed }];
        case "error": return ["error", { seq, code: String(f.code ?? "error"), message: String(f.message ?? ""), replayed }];
        case "session.ended": return ["ended", { seq, reason: f.reason, replayed }];
    }
    return null;
}

/**
 * The value of a result text: its JSON, or the text when it is not JSON
 * (a tool card's `value`).
 * @param {string | undefined} text
 */
export function jsonValue(text) {
    if (text === undefined) return undefined;
    try {
        return JSON.parse(text);
    } catch {
        return text;
    }
}
