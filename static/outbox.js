/**
 * outbox.js: what the page sends that must reach the session: the frames
 * that wait for the session to open, and the user messages written but not
 * yet confirmed by the gateway.
 *
 * Every message gets an id (`newMessageId`). The gateway answers a message
 * with an id by `message.taken {id}` once the session has stored it, and
 * takes a message of an id it has seen once: so a message is kept here from
 * its write until that answer (or an `error` naming its id), and the next
 * connection, or the page after a reload, sends it again, first and in
 * order. A message that waits for a session (sent while offline) is kept
 * across a reload too. docs/sdk.md#messages-are-taken-once. A Stop written
 * while a turn runs is kept, in its place among them, until the page sees
 * the turn end (`saw`): one written into a socket that died goes again on
 * the next, before the messages written after it. Not across a reload.
 *
 * Exports: Outbox, newMessageId.
 *
 * @module outbox
 */

/** The frames waiting for a session, and the messages not confirmed. */
export class Outbox {
    /** @type {any[]} */ #waiting = []; // not written: no session open
    /** @type {any[]} */ #unsent = []; // messages written, not confirmed, in order
    /** @type {() => void} */ #changed;

    /** @param {() => void} changed  The unconfirmed messages changed (store them). */
    constructor(changed) {
        this.#changed = changed;
    }

    /**
     * The messages not confirmed, in the order they go: written ones, then
     * those waiting for a session (the stored copy's `unsent`, which a
     * reload sends).
     */
    get unsent() {
        const waiting = this.#waiting.filter((f) => f.type === "message");
        const written = this.#unsent.filter((f) => f.type === "message");
        return waiting.length === 0 ? written : [...written, ...waiting];
    }

    /**
     * Keeps frame until a session opens; ahead: before the messages that
     * wait (a Stop of the turn the page showed running, which those
     * messages' turns come after).
     */
    wait(frame, ahead = false) {
        const i = ahead ? this.#waiting.findIndex((f) => f.type === "message") : -1;
        if (i >= 0) this.#waiting.splice(i, 0, frame);
        else this.#waiting.push(frame);
        if (frame.type === "message") this.#changed();
    }

    /** A frame of type is waiting, or written and not confirmed. @param {string} type */
    waits(type) { return this.#waiting.some((f) => f.type === type) || this.#unsent.some((f) => f.type === type); }

    /**
     * A frame was written, or its write failed: a message is kept until
     * confirmed, a Stop until its turn's end is seen.
     * @param {any} frame  @param {boolean} [running]  a turn runs (a Stop: kept)
     */
    written(frame, running = false) {
        if (this.#unsent.includes(frame)) return;
        if (frame.type === "cancel" && running) {
            this.#unsent.push(frame);
            return;
        }
        if (frame.type !== "message" || !frame.id) return;
        this.#unsent.push(frame);
        this.#changed();
    }

    /**
     * A session event, in order: a turn's end (the agent's model.finished,
     * session.idle, session.ended) confirms the Stops written before it.
     * @param {{type: string, parent?: string}} f
     */
    saw(f) {
        const end = f.type === "session.idle" || f.type === "session.ended" || (f.type === "model.finished" && !f.parent);
        if (end && this.#unsent.some((u) => u.type === "cancel")) this.#unsent = this.#unsent.filter((u) => u.type !== "cancel");
    }

    /**
     * The gateway took the message of id, or refused it: it is not sent
     * again. Returns its frame, or null when it is not one of ours.
     * @param {string} id
     */
    confirm(id) {
        const i = this.#unsent.findIndex((f) => f.id === id);
        if (i < 0) return null;
        const [frame] = this.#unsent.splice(i, 1);
        this.#changed();
        return frame;
    }

    /** Everything to send on a new session's connection, in order: the unconfirmed messages, then what waited. Empties both. */
    take() {
        const out = [...this.#unsent, ...this.#waiting];
        this.#unsent = [];
        this.#waiting = [];
        // What is written again comes back (written); what is not (over
        // the limits) leaves the stored copy too.
        if (out.some((f) => f.type === "message")) this.#changed();
        return out;
    }

    /** Restores the unconfirmed messages of a stored session. @param {any[]} unsent */
    restore(unsent) { this.#unsent = unsent.slice(); }

    /** The session is forgotten: its unconfirmed messages go (it may have taken them); waiting messages stay, for the next. */
    forget() {
        this.#unsent = [];
        this.#waiting = this.#waiting.filter((f) => f.type === "message");
    }
}

/** A new message id: 16 random bytes, base64url (22 characters). */
export function newMessageId() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
