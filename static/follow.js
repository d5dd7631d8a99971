/**
 * follow.js keeps the chat page's log at its bottom while new content comes
 * (streamed text, a card, a tool's own UI), for a reader who is there, and
 * stays put once they scroll up to read. The log scrolls by itself, but in
 * a short window (app.css, under 30rem tall) the page scrolls instead, with
 * the composer stuck to its bottom: then it is the page that follows.
 *
 * Exports: followLog(log), which returns {follow(), stick()}: scroll to
 * the bottom if the reader is there; take the reader there from now on
 * (they just sent a message).
 *
 * @module follow
 */

/** How near the bottom (px) counts as there. */
const NEAR = 48;

/** @param {HTMLElement} log */
export function followLog(log) {
    const doc = log.ownerDocument;
    const win = doc.defaultView;
    /** What scrolls: the log, or in a short window the page. */
    const scroller = () => (win?.getComputedStyle(log).overflowY === "visible" && doc.scrollingElement) || log;
    // there: the reader is at the bottom. lastTop: where follow left the
    // scroller; anywhere else, the reader (or the browser) moved it.
    let there = true, lastTop = NaN;
    const near = (/** @type {Element} */ s) => s.scrollHeight - s.scrollTop - s.clientHeight < NEAR;
    const onScroll = () => {
        const s = scroller();
        if (s.scrollTop !== lastTop) there = near(s);
    };
    log.addEventListener("scroll", onScroll, { passive: true });
    win?.addEventListener("scroll", onScroll, { passive: true });

    function follow() {
        const s = scroller();
        // Moved since, and its scroll event not in yet (it comes with the
        // next frame): the new text must not take the reader back down.
        if (!Number.isNaN(lastTop) && s.scrollTop !== lastTop) there = near(s);
        if (!there) return;
        s.scrollTop = s.scrollHeight;
        lastTop = s.scrollTop;
    }
    new MutationObserver(follow).observe(log, { childList: true, subtree: true, characterData: true });
    return {
        follow,
        stick() {
            there = true;
            lastTop = NaN;
        },
    };
}
