/**
 * reply.js renders the assistant's reply as the model streams it, into the
 * chat page's log: a message item that Markdown fills at most every 50 ms
 * (a fast model sends hundreds of deltas), busy (aria-busy,
 * data-streaming) until the model's turn ends, then kept until the
 * transcript's assistant message claims it, whose text is the reply's.
 *
 * Exports: streamReply(newItem), where newItem() adds an empty assistant
 * message to the log; it returns {streaming, delta(text), discard(), end(),
 * claim(text), finish(el), reset()}.
 *
 * @module reply
 */

import { renderMarkdown } from "./markdown.js";
import { must } from "./dom.js";

/** Streamed Markdown is rendered at most this often (ms). */
const RENDER_EVERY = 50;

/** @param {() => HTMLElement} newItem */
export function streamReply(newItem) {
    /** @type {HTMLElement | null} the item the current turn streams into */
    let streaming = null;
    /** @type {HTMLElement | null} a finished turn's item, waiting for its transcript message */
    let unclaimed = null;
    let text = "", timer = 0, renderedAt = 0;
    /** @type {WeakMap<HTMLElement, string>} the Markdown each item's text shows */
    const shown = new WeakMap();

    /** Renders md into el's text, unless it shows it already. @param {HTMLElement} el @param {string} md */
    function show(el, md) {
        if (shown.get(el) === md) return;
        renderMarkdown(must(el, "[data-testid=message-text]"), md);
        shown.set(el, md);
    }

    /** Renders the streamed text now. */
    function render() {
        timer = (clearTimeout(timer), 0);
        renderedAt = performance.now();
        if (streaming) show(streaming, text);
    }

    /** A message item no longer streaming. @param {HTMLElement} el */
    function finish(el) {
        el.dataset.streaming = "false";
        el.removeAttribute("aria-busy");
    }

    return {
        /** Whether a reply is streaming. */
        get streaming() {
            return streaming !== null;
        },
        /** Adds a delta's text, the reply's item made at the first. @param {string} piece */
        delta(piece) {
            if (!streaming) {
                streaming = newItem();
                streaming.dataset.streaming = "true";
                streaming.setAttribute("aria-busy", "true");
                text = "";
            }
            text += piece;
            if (timer) return; // a render is due: a long chat's replay brings thousands of deltas
            const wait = RENDER_EVERY - (performance.now() - renderedAt);
            if (wait <= 0) render();
            else timer = setTimeout(render, wait);
        },
        /** Drops the reply streamed so far: a restart cut the turn, which streams anew. */
        discard() {
            timer = (clearTimeout(timer), 0);
            streaming?.remove();
            streaming = null;
        },
        /** The model's turn ended: the reply is rendered whole and waits for its message. */
        end() {
            if (!streaming) return;
            render();
            finish(streaming);
            unclaimed = streaming;
            streaming = null;
        },
        /**
         * The item of the transcript's assistant message, whose text is md:
         * the reply's, showing md (rendered again only when the stream's
         * text differs: a long chat's replay renders each reply once), or
         * null when none streamed. @param {string} md
         */
        claim(md) {
            const el = streaming ?? unclaimed;
            timer = (clearTimeout(timer), 0);
            if (el) show(el, md);
            streaming = unclaimed = null;
            return el;
        },
        finish,
        /** Forgets the reply, its items gone with the log (a new chat), or the page unmounted. */
        reset() {
            timer = (clearTimeout(timer), 0);
            streaming = unclaimed = null;
        },
    };
}
