// What the worker helper remembers of the requests it has answered, so that
// a signed request captured on the wire and replayed within the signature
// window does not run anything twice (docs/workers.md, "Replays").
//
// The handler (index.mjs) keys a tool.execute by its session, call id and
// attempt, and any other request by its signature. An attempt's entry holds
// its run while decide works (a repeat waits for it), then its answer (a
// repeat gets it again); a signature's entry only says it was seen. One
// exception: a run every request left (the gateway crashed) that failed is
// forgotten, so the attempt the restarted gateway sends again runs; a
// captured copy of that attempt, replayed within the window, runs too.
//
// Memory is bounded three ways:
// - an entry expires ttlMs after the later of the request's signing time
//   and its answer (the window plus a margin: past it, verify refuses a
//   replay as stale anyway); a running one lasts until it is answered;
// - at most maxEntries are kept: past it, the oldest entry goes;
// - answers take at most maxBytes in all: past it, the oldest answers go,
//   but their entries stay, so a repeat is refused rather than run again.
//
// Exports: ReplayMemory, DEFAULT_MAX_REPLAY_ENTRIES, DEFAULT_MAX_REPLAY_BYTES,
// REPLAY_MARGIN_MS.

/** The most entries kept. */
export const DEFAULT_MAX_REPLAY_ENTRIES = 100_000;

/** The most bytes of remembered answers kept. */
export const DEFAULT_MAX_REPLAY_BYTES = 64 << 20;

/** How long past the signature window an entry stays, for rounding and slow requests. */
export const REPLAY_MARGIN_MS = 5_000;

/**
 * @typedef {object} Entry
 * @property {number} expires  ms since the epoch; Infinity while it runs
 * @property {any} [run]       the run in progress (an attempt's)
 * @property {any} [answer]    the answer (an attempt's), until dropped for room
 */

/** Keys seen recently, and what was answered to them. */
export class ReplayMemory {
    /** @type {Map<string, Entry>} oldest first */
    #entries = new Map();
    /** @type {Map<string, number>} keys with an answer kept, and its size; oldest first */
    #answered = new Map();
    #bytes = 0;
    #ttlMs;
    #maxEntries;
    #maxBytes;
    #now;

    /**
     * @param {object} o
     * @param {number} o.ttlMs how long an entry lasts after its request was signed or answered
     * @param {number} [o.maxEntries] default DEFAULT_MAX_REPLAY_ENTRIES
     * @param {number} [o.maxBytes] default DEFAULT_MAX_REPLAY_BYTES
     * @param {() => number} [o.now] the clock, in ms; default Date.now
     */
    constructor({ ttlMs, maxEntries = DEFAULT_MAX_REPLAY_ENTRIES, maxBytes = DEFAULT_MAX_REPLAY_BYTES, now = Date.now }) {
        this.#ttlMs = ttlMs;
        this.#maxEntries = Math.max(1, maxEntries);
        this.#maxBytes = maxBytes;
        this.#now = now;
    }

    /** How many entries are kept. */
    get size() {
        this.#prune();
        return this.#entries.size;
    }

    /** How many bytes of answers are kept. */
    get bytes() {
        return this.#bytes;
    }

    /**
     * The entry for key: `{run}` while it runs, `{answer}` once answered,
     * neither when it was only seen or its answer was dropped for room;
     * undefined when unknown or expired.
     * @param {string} key
     * @returns {Entry | undefined}
     */
    get(key) {
        this.#prune();
        const entry = this.#entries.get(key);
        if (entry && entry.expires <= this.#now()) {
            this.#delete(key);
            return undefined;
        }
        return entry;
    }

    /**
     * Records that key was seen in a request signed at signedAt (ms); false
     * when it already was: a replay.
     * @param {string} key
     * @param {number} signedAt
     */
    see(key, signedAt) {
        if (this.get(key)) return false;
        this.#put(key, { expires: this.#expiry(signedAt) });
        return true;
    }

    /**
     * Records key's run in progress; it does not expire until finish.
     * @param {string} key
     * @param {any} run
     */
    start(key, run) {
        this.#put(key, { expires: Infinity, run });
    }

    /**
     * Records key's answer, of size bytes, for a request signed at signedAt.
     * @param {string} key
     * @param {any} answer
     * @param {number} bytes
     * @param {number} signedAt
     */
    finish(key, answer, bytes, signedAt) {
        // Put again, so the order of the entries stays close to their expiry's.
        this.#put(key, { expires: this.#expiry(signedAt), answer });
        this.#answered.set(key, bytes);
        this.#bytes += bytes;
        for (const [old, size] of this.#answered) {
            if (this.#bytes <= this.#maxBytes) break;
            this.#answered.delete(old);
            this.#bytes -= size;
            const entry = this.#entries.get(old);
            if (entry) delete entry.answer;
        }
    }

    /**
     * Forgets key: a later request for it is new.
     * @param {string} key
     */
    forget(key) {
        this.#delete(key);
    }

    /** @param {number} signedAt */
    #expiry(signedAt) {
        return Math.max(signedAt, this.#now()) + this.#ttlMs;
    }

    /** @param {string} key @param {Entry} entry */
    #put(key, entry) {
        this.#delete(key);
        this.#entries.set(key, entry);
        for (const old of this.#entries.keys()) {
            if (this.#entries.size <= this.#maxEntries) break;
            this.#delete(old);
        }
    }

    /** @param {string} key */
    #delete(key) {
        this.#entries.delete(key);
        const size = this.#answered.get(key);
        if (size === undefined) return;
        this.#answered.delete(key);
        this.#bytes -= size;
    }

    /**
     * Drops the expired entries at the front. Entries are kept roughly in
     * the order they expire, so this stops at the first one that has not;
     * get() checks the others. Running entries are stepped over (a few).
     */
    #prune() {
        const now = this.#now();
        for (const [key, entry] of this.#entries) {
            if (entry.expires === Infinity) continue;
            if (entry.expires > now) break;
            this.#delete(key);
        }
    }
}
