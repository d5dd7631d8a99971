/**
 * announce.js is the chat page's voice for screen readers: one polite live
 * region, visually hidden (web/chat.templ's `announcer`), that says what
 * happened once, in a sentence. The conversation log itself is not a live
 * region: a streamed reply's last block or two are rendered again every
 * 50 ms, so a live log would be read again and again, and a replayed chat
 * read from its start.
 *
 * It says, from the client's events: each finished assistant reply (once,
 * when the model is done with it, not delta by delta); a tool call that
 * asks for approval, and each call's outcome ("get_weather: done",
 * "get_weather failed: …"); a lost connection and its return. Never what a
 * page is shown again: the events restored from storage after a reload, and
 * a switched-to chat's replay up to the seq its session.opened gives. What
 * a resume's replay brings (what happened while the socket was down) is
 * news, and said. The chat page adds its notices and tools their questions
 * with say(text, seq); a part of the page that knows nothing of the chat
 * says a sentence by dispatching a bubbling `announce` event whose detail
 * is the text (markdown.js's Copy: `Copied.`).
 *
 * Exports: mountAnnouncer(el, client), which returns {say(text, seq?), off()}.
 *
 * @module announce
 */

import { isSettled } from "./cards.js";
import { CLOSE } from "./codes.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */

/** How many past sentences stay in the region (a reader that comes late finds the last few). */
const KEEP = 5;

/**
 * Speaks through el, from client's events.
 * @param {HTMLElement} el  The page's live region (aria-live="polite").
 * @param {GatewayClient} client
 */
export function mountAnnouncer(el, client) {
    const doc = el.ownerDocument;
    /** @type {Map<string, string>} what was said of each call, by id: its status, or "approval" */
    const said = new Map();
    let lost = false;
    // Session events up to this seq are history (Infinity: all of them,
    // until a session opens); current is the seq of the event being handled.
    let historyUntil = Infinity, switching = false, loaded = true, current = 0; // loaded: no session.opened yet

    /** Whether the session event seq is history, which is not said. @param {number} [seq] */
    const history = (seq) => seq !== undefined && seq <= historyUntil;

    /**
     * Adds a sentence (a live region reads what is added), unless it is
     * about a session event that is history.
     * @param {string} text @param {number} [seq]  The event it is about.
     */
    function say(text, seq) {
        if (history(seq)) return;
        const line = doc.createElement("p");
        line.textContent = text;
        el.append(line);
        while (el.childElementCount > KEEP) el.firstElementChild?.remove();
    }

    const offs = [
        client.on("frame", (f) => {
            if (typeof f?.seq === "number") current = f.seq;
        }),
        client.on("reset", () => {
            said.clear();
            historyUntil = Infinity;
            switching = true;
        }),
        // A switch's replay is history, and so is a page's first when it
        // holds nothing of its chat (a reload whose stored copy was lost);
        // a resume's is what the page missed.
        client.on("opened", ({ seq }) => {
            historyUntil = switching || (loaded && client.seq === 0) ? seq ?? 0 : 0;
            switching = loaded = false;
        }),
        client.on("message", ({ message, seq }) => {
            // The sentence is made for a message said, not for each one a replay brings.
            if (message.role === "assistant" && message.content && !history(seq)) say(`Assistant: ${plainText(message.content)}`, seq);
        }),
        client.on("tool", (card) => {
            const now = card.approval ? "approval" : isSettled(card.status) ? card.status : "";
            if (!now || said.get(card.id) === now) return;
            said.set(card.id, now);
            // A sub-agent's calls are its own business; the call it answers is said.
            if (card.parent && now !== "approval") return;
            if (now === "approval") say(`${card.name} asks for your approval to run: Approve or Deny.`, current);
            else if (now === "done") say(`${card.name}: done.`, current);
            else say(`${card.name} failed: ${card.error ?? "no reason given"}`, current);
        }),
        listen(doc, "announce", (/** @type {Event} */ e) => {
            const text = /** @type {CustomEvent} */ (e).detail;
            if (typeof text === "string" && text) say(text);
        }),
        client.on("state", ({ state, code, reason, retryIn }) => {
            if (code === CLOSE.FORBIDDEN) say(`Refused: ${reason}`);
            else if (state === "closed" && retryIn !== undefined && !lost) { // closed for good (the chat ended, close()): nothing to say
                lost = true;
                say("Connection lost. Retrying.");
            } else if (state === "open" && lost) {
                lost = false;
                say("Connected again.");
            }
        }),
    ];
    return {
        say,
        off() {
            offs.forEach((off) => off());
        },
    };
}

/**
 * Adds a listener and returns what removes it, as client.on does.
 * @param {EventTarget} target @param {string} type @param {(e: Event) => void} fn
 */
function listen(target, type, fn) {
    target.addEventListener(type, fn);
    return () => target.removeEventListener(type, fn);
}

/**
 * Markdown as it reads aloud: the text without its marks (emphasis, code
 * fences, headings' #, links' URLs).
 * @param {string} md
 */
export function plainText(md) {
    return md
        .replace(/```[^\n]*\n?/g, "")
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
        .replace(/^\s{0,3}(#{1,6}|>|[-*+]|\d+\.)\s+/gm, "")
        .replace(/(\*\*|\*|`|~~)(?=\S)([^]*?\S)\1/g, "$2")
        .replace(/(?<!\w)(__|_)(?=\S)([^]*?\S)\1(?!\w)/g, "$2")
        .replace(/^\s*\|?[\s:|-]+\|?\s*$/gm, "")
        .replace(/\|/g, " ")
        .replace(/\s+/g, " ")
        .trim();
}
