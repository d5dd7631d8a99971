/**
 * store.js: where a session survives a page reload (sessionStorage by
 * default).
 *
 * It keeps `{v: 1, session, seq, epoch, events, unsent}` under one key: the
 * session id, the last seq the page has, the epoch of the session.opened
 * they came with, the session's events up to it, and the messages sent
 * that the gateway has not confirmed (sent again after the reload). `seq` and
 * `events` are written together, so a reload finds them consistent. Writes
 * are batched (at most one every SAVE_DELAY_MS, or every 20 times as long
 * as the last write took, up to SAVE_MAX_DELAY_MS: a long chat's copy is
 * megabytes, and its replay would spend its time writing them; at once on
 * `flush()`);
 * when the storage is full only the session id is kept, with seq 0, so the
 * next load replays the whole session from the gateway, and the whole copy
 * is not tried again while it is as large (a chat of large tool results
 * made every write stringify megabytes to fail again).
 *
 * Exports:
 * - SessionStore: load(), schedule(), flush(), clear() for one key.
 * - defaultStorage(): sessionStorage, or null where it is blocked.
 * - DEFAULT_STORAGE_KEY, SAVE_DELAY_MS.
 *
 * @module store
 */

export const DEFAULT_STORAGE_KEY = "gateway.session";
export const SAVE_DELAY_MS = 50;
const SAVE_MAX_DELAY_MS = 2000;

/**
 * @typedef {object} StoredSession  What a page keeps of its session.
 * @property {string} session
 * @property {number} seq       The last session event's seq.
 * @property {string} [epoch]   The epoch of the session.opened they came with ("" unknown).
 * @property {any[]} events     The session's events, in seq order, up to seq.
 * @property {any[]} unsent     Message frames sent and not confirmed, in order.
 */

/**
 * @typedef {Pick<Storage, "getItem" | "setItem" | "removeItem">} StorageLike
 */

/** One session's stored copy under one key of a Storage. */
export class SessionStore {
    /** @type {StorageLike | null} */ #storage;
    /** @type {string} */ #key;
    /** @type {() => StoredSession | null} */ #read;
    /** @type {ReturnType<typeof setTimeout> | null} */ #timer = null;
    /** How long the last whole write took, in ms. */ #took = 0;
    /** @type {{session: string, events: number, unsent: number} | null} */ #overQuota = null; // the whole copy that did not fit

    /**
     * @param {StorageLike | null} storage  null: keep nothing.
     * @param {string} key
     * @param {() => StoredSession | null} read  The state to write, read
     *     when a write happens; null: nothing to keep yet.
     */
    constructor(storage, key, read) {
        this.#storage = storage;
        this.#key = key;
        this.#read = read;
    }

    /**
     * The stored session, or null. `events` is empty when what is stored
     * cannot be trusted to end at `seq` (the page then resumes from 0).
     * @returns {StoredSession | null}
     */
    load() {
        if (!this.#storage) return null;
        let data;
        try {
            data = JSON.parse(this.#storage.getItem(this.#key) ?? "null");
        } catch {
            return null;
        }
        if (!data || typeof data.session !== "string" || !data.session) return null;
        const unsent = (Array.isArray(data.unsent) ? data.unsent : []).filter((f) =>
            f && f.type === "message" && typeof f.id === "string" && f.id && typeof f.content === "string");
        const events = Array.isArray(data.events) ? data.events : [];
        const ordered = events.every((e, i) => e && typeof e.seq === "number" && typeof e.type === "string" &&
            (i === 0 || e.seq > events[i - 1].seq));
        if (!ordered || events.length === 0 || events[events.length - 1].seq !== data.seq) {
            return { session: data.session, seq: 0, events: [], unsent };
        }
        return { session: data.session, seq: data.seq, epoch: typeof data.epoch === "string" ? data.epoch : "", events, unsent };
    }

    /** Writes soon: at most one write per SAVE_DELAY_MS, or 20 last writes' time. */
    schedule() {
        if (!this.#storage || this.#timer !== null) return;
        const delay = Math.min(Math.max(SAVE_DELAY_MS, 20 * this.#took), SAVE_MAX_DELAY_MS);
        this.#timer = setTimeout(() => this.flush(), delay);
    }

    /** Writes now. */
    flush() {
        this.#cancel();
        const state = this.#read();
        if (!this.#storage || !state) return;
        const over = this.#overQuota;
        // A session's events only grow: what did not fit will not fit, until
        // its unconfirmed messages go.
        if (over === null || over.session !== state.session || state.events.length < over.events || state.unsent.length < over.unsent) {
            try {
                const start = Date.now();
                this.#storage.setItem(this.#key, JSON.stringify({ v: 1, session: state.session, seq: state.seq, epoch: state.epoch ?? "", events: state.events, unsent: state.unsent }));
                this.#took = Date.now() - start;
                return;
            } catch {
                this.#overQuota = { session: state.session, events: state.events.length, unsent: state.unsent.length };
            }
        }
        // Over quota: keep only the session and what was not confirmed; a
        // reload replays the session from the gateway.
        try {
            this.#storage.setItem(this.#key, JSON.stringify({ v: 1, session: state.session, seq: 0, events: [], unsent: state.unsent }));
        } catch { /* storage unusable */ }
    }

    /** Removes the stored copy, and any write still pending. */
    clear() {
        this.#cancel();
        this.#overQuota = null;
        try {
            this.#storage?.removeItem(this.#key);
        } catch { /* storage unusable */ }
    }

    #cancel() {
        if (this.#timer !== null) clearTimeout(this.#timer);
        this.#timer = null;
    }
}

/** sessionStorage, or null where the page may not use it. */
export function defaultStorage() {
    try {
        return globalThis.sessionStorage ?? null;
    } catch {
        return null; // blocked (sandboxed frame, privacy settings)
    }
}
