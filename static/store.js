/**
 * store.js: where a session survives a page reload (sessionStorage by
 * default).
 *
 * Under its key it keeps `{v: 2, session, seq, epoch, chunks, unsent}`: the
 * session id, the last seq the page has, the epoch of the session.opened
 * they came with, the seq of each chunk's last event, and the messages sent
 * that the gateway has not confirmed (sent again after the reload). The
 * events up to seq are under `key#1` to `key#n` (n: chunks' length), each
 * `{session, events}`, the events in order. A session's events only grow,
 * so a chunk is written once it is full (about CHUNK_CHARS of JSON) and
 * never again: a write puts the last chunk and the head, whatever the
 * chat's length (a long chat's copy is megabytes, and writing it whole
 * took a long task at each turn). The chunks go first, so a head never
 * names one not written; a chunk that is not the one its head names (its
 * session, its last seq: another writer on the key) makes the copy resume
 * from the start. A write that would change nothing is not made (a
 * reload's restore, a pagehide right after a write). Writes are batched
 * (at most one every SAVE_DELAY_MS, or every 20 times as long as the last
 * write took, up to SAVE_MAX_DELAY_MS; at once on `flush()`). A copy of
 * the first version (`{v: 1, session, seq, epoch, events, unsent}` under
 * the key alone) still loads.
 *
 * When the storage is full only the session id is kept, with seq 0, so the
 * next load replays the whole session from the gateway, and the copy is not
 * tried again while the session's events are as many, until a write fits
 * again (a chat of large tool results made every write stringify megabytes
 * to fail again).
 *
 * Exports:
 * - SessionStore: load(), schedule(), flush(), clear() for one key.
 * - defaultStorage(): sessionStorage, or null where it is blocked.
 * - DEFAULT_STORAGE_KEY, SAVE_DELAY_MS, CHUNK_CHARS.
 *
 * @module store
 */

export const DEFAULT_STORAGE_KEY = "gateway.session";
export const SAVE_DELAY_MS = 50;
const SAVE_MAX_DELAY_MS = 2000;
/** A chunk of events is full, and written no more, at this many characters of JSON. */
export const CHUNK_CHARS = 64 * 1024;

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

/**
 * @typedef {object} Written  What the storage holds of this store's session.
 * @property {string} session
 * @property {number} full      Events in the full chunks.
 * @property {number[]} ends    The seq of each full chunk's last event.
 * @property {number} lastSeq   The seq of the last event written (0: none).
 * @property {string[]} open    The events after them, each as JSON: the last chunk.
 * @property {number} openChars
 * @property {number} openStored How many of open the storage's last chunk holds.
 * @property {string} head      The head as written ("": unknown).
 */

/** One session's stored copy under one key of a Storage. */
export class SessionStore {
    /** @type {StorageLike | null} */ #storage;
    /** @type {string} */ #key;
    /** @type {() => StoredSession | null} */ #read;
    /** @type {ReturnType<typeof setTimeout> | null} */ #timer = null;
    /** How long the last write took, in ms. */ #took = 0;
    /** @type {{session: string, events: number, unsent: number} | null} */ #overQuota = null; // the copy that did not fit
    /** @type {Written | null} */ #written = null;
    /** Chunk keys this store may have left, from 1: removed when a copy needs fewer. */ #chunksLeft = 0;

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
        const chunks = data.v === 2 ? this.#loadChunks(data.session, data.chunks) : null;
        if (data.v !== 2) {
            // A head of the first version, which an earlier version of the
            // page may have written over a chunked copy: its chunks go with
            // this store's next write.
            while (this.#storage.getItem(chunkKey(this.#key, this.#chunksLeft + 1)) !== null) this.#chunksLeft++;
        }
        const events = chunks ? chunks.flat() : Array.isArray(data.events) ? data.events : [];
        const ordered = events.every((e, i) => e && typeof e.seq === "number" && typeof e.type === "string" &&
            (i === 0 || e.seq > events[i - 1].seq));
        if (!ordered || events.length === 0 || events[events.length - 1].seq !== data.seq) {
            return { session: data.session, seq: 0, events: [], unsent };
        }
        const epoch = typeof data.epoch === "string" ? data.epoch : "";
        if (chunks) {
            // What is stored is what a write of this state would put: the
            // restore writes nothing, and the next write the last chunk.
            const open = /** @type {any[]} */ (chunks.at(-1)).map((e) => JSON.stringify(e));
            this.#written = {
                session: data.session, full: events.length - open.length, ends: data.chunks.slice(0, -1), lastSeq: data.seq,
                open, openChars: open.reduce((n, e) => n + e.length + 1, 1), openStored: open.length,
                head: headOf({ session: data.session, seq: data.seq, epoch, events, unsent }, data.chunks),
            };
        }
        return { session: data.session, seq: data.seq, epoch, events, unsent };
    }

    /**
     * The stored chunks a head names by their last events' seqs (ends),
     * each an array of events; null when one is missing, or not the one
     * named: not session's, or not ending there.
     * @param {string} session @param {unknown} ends
     * @returns {any[][] | null}
     */
    #loadChunks(session, ends) {
        if (!Array.isArray(ends) || ends.length === 0) return null;
        this.#chunksLeft = Math.max(this.#chunksLeft, ends.length);
        const out = [];
        for (const [i, end] of ends.entries()) {
            let chunk;
            try {
                chunk = JSON.parse(/** @type {StorageLike} */ (this.#storage).getItem(chunkKey(this.#key, i + 1)) ?? "null");
            } catch {
                return null;
            }
            if (chunk?.session !== session || !Array.isArray(chunk.events) || chunk.events.at(-1)?.seq !== end) return null;
            out.push(chunk.events);
        }
        return out;
    }

    /** Writes soon: at most one write per SAVE_DELAY_MS, or 20 last writes' time. */
    schedule() {
        if (!this.#storage || this.#timer !== null) return;
        const delay = Math.min(Math.max(SAVE_DELAY_MS, 20 * this.#took), SAVE_MAX_DELAY_MS);
        this.#timer = setTimeout(() => this.flush(), delay);
    }

    /** Writes now: what changed since the last write. */
    flush() {
        this.#cancel();
        const state = this.#read();
        const storage = this.#storage;
        if (!storage || !state) return;
        const over = this.#overQuota;
        // A session's events only grow: what did not fit will not fit, until
        // its unconfirmed messages go.
        if (over === null || over.session !== state.session || state.events.length < over.events || state.unsent.length < over.unsent) {
            try {
                const start = Date.now();
                this.#write(storage, state);
                this.#took = Date.now() - start;
                this.#overQuota = null; // it fits now (room made elsewhere): the next write may not be cut
                return;
            } catch {
                this.#overQuota = { session: state.session, events: state.events.length, unsent: state.unsent.length };
            }
        }
        // Over quota: keep only the session and what was not confirmed; a
        // reload replays the session from the gateway.
        this.#written = null;
        this.#removeChunks(storage, 0);
        try {
            storage.setItem(this.#key, JSON.stringify({ v: 1, session: state.session, seq: 0, events: [], unsent: state.unsent }));
        } catch { /* storage unusable */ }
    }

    /**
     * Writes state's chunks that changed, then its head, unless it is the
     * one written last.
     * @param {StorageLike} storage @param {StoredSession} state
     */
    #write(storage, state) {
        let w = this.#written;
        const events = state.events;
        // Not the events written (another session, a copy of another
        // version, a session started again): all anew.
        const count = w ? w.full + w.open.length : 0;
        if (!w || w.session !== state.session || events.length < count || (count > 0 && events[count - 1].seq !== w.lastSeq)) {
            w = { session: state.session, full: 0, ends: [], lastSeq: 0, open: [], openChars: 1, openStored: 0, head: "" };
        }
        const added = events.length - w.full - w.open.length;
        for (const e of events.slice(events.length - added)) {
            const json = JSON.stringify(e);
            if (w.open.length > 0 && w.openChars + json.length + 1 > CHUNK_CHARS) {
                // The chunk is full: written as it is, if it was not, and never again.
                if (w.openStored < w.open.length) this.#putChunk(storage, w.session, w.ends.length + 1, w.open);
                w.full += w.open.length;
                w.ends.push(events[w.full - 1].seq);
                w.open = [];
                w.openChars = 1;
                w.openStored = 0;
            }
            w.open.push(json);
            w.openChars += json.length + 1;
        }
        w.lastSeq = events.at(-1)?.seq ?? 0;
        const ends = w.open.length > 0 ? [...w.ends, w.lastSeq] : w.ends;
        if (w.openStored < w.open.length) {
            this.#putChunk(storage, w.session, ends.length, w.open);
            w.openStored = w.open.length;
        }
        const head = headOf(state, ends);
        if (head !== w.head) storage.setItem(this.#key, head);
        w.head = head;
        this.#written = w;
        this.#removeChunks(storage, ends.length);
    }

    /**
     * Writes chunk n of session's copy, events as JSON.
     * @param {StorageLike} storage @param {string} session @param {number} n @param {string[]} events
     */
    #putChunk(storage, session, n, events) {
        this.#chunksLeft = Math.max(this.#chunksLeft, n); // removed with the copy, even if this write fails part way
        storage.setItem(chunkKey(this.#key, n), `{"session":${JSON.stringify(session)},"events":[${events.join(",")}]}`);
    }

    /** Removes the chunk keys after the first keep. @param {StorageLike} storage @param {number} keep */
    #removeChunks(storage, keep) {
        for (let i = keep + 1; i <= this.#chunksLeft; i++) {
            try {
                storage.removeItem(chunkKey(this.#key, i));
            } catch { /* storage unusable */ }
        }
        this.#chunksLeft = keep;
    }

    /** Removes the stored copy, and any write still pending. */
    clear() {
        this.#cancel();
        this.#overQuota = null;
        this.#written = null;
        if (!this.#storage) return;
        try {
            // The chunks the copy names, which another page may have written.
            const { chunks } = JSON.parse(this.#storage.getItem(this.#key) ?? "{}") ?? {};
            if (Array.isArray(chunks)) this.#chunksLeft = Math.max(this.#chunksLeft, chunks.length);
        } catch { /* not a copy: no chunks */ }
        this.#removeChunks(this.#storage, 0);
        try {
            this.#storage.removeItem(this.#key);
        } catch { /* storage unusable */ }
    }

    #cancel() {
        if (this.#timer !== null) clearTimeout(this.#timer);
        this.#timer = null;
    }
}

/** The key of a copy's chunk n (from 1). @param {string} key @param {number} n */
const chunkKey = (key, n) => `${key}#${n}`;

/** A copy's head. @param {StoredSession} state @param {number[]} chunks  each chunk's last seq */
function headOf(state, chunks) {
    if (chunks.length === 0) return JSON.stringify({ v: 1, session: state.session, seq: state.seq, epoch: state.epoch ?? "", events: [], unsent: state.unsent });
    return JSON.stringify({ v: 2, session: state.session, seq: state.seq, epoch: state.epoch ?? "", chunks, unsent: state.unsent });
}

/** sessionStorage, or null where the page may not use it. */
export function defaultStorage() {
    try {
        return globalThis.sessionStorage ?? null;
    } catch {
        return null; // blocked (sandboxed frame, privacy settings)
    }
}
