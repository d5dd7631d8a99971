/**
 * follow.js keeps the chat page's log at its bottom while new content comes
 * (streamed text, a card, a tool's own UI), for a reader who is there, and
 * stays put once they scroll up to read. The log scrolls by itself, but in
 * a short window (app.css, under 30rem tall) the page scrolls instead, with
 * the composer stuck to its bottom: then it is the page that follows. A
 * window that crosses that height (a phone turned) keeps a reader who was
 * at the bottom there, and one who had scrolled up at what they were
 * reading.
 *
 * Exports: followLog(log, items?), which returns {follow(), stick(),
 * unmount()}: scroll to the bottom if the reader is there, at the next
 * frame (once however often it is asked); take the reader there from now
 * on (they just sent a message); stop following. items is
 * the element whose children are the log's items, top to bottom (default
 * the log): where a reader who scrolled up is reading.
 *
 * @module follow
 */

/** How near the bottom (px) counts as there. */
const NEAR = 48;

/**
 * @param {HTMLElement} log
 * @param {Element} [items]
 */
export function followLog(log, items = log) {
    const doc = log.ownerDocument;
    const win = doc.defaultView;
    /** What scrolls: the log, or in a short window the page. */
    const scroller = () => (win?.getComputedStyle(log).overflowY === "visible" && doc.scrollingElement) || log;
    // there: the reader is at the bottom. left*: the scroller follow last
    // took to its bottom, where it left it and how tall its content was.
    let there = true, leftIn = /** @type {Element | null} */ (null), leftAt = 0, leftHeight = 0;
    // Where a reader who scrolled up reads: the first item not above the
    // scroller's top, how far below that top it starts, and, when it starts
    // above it, how much of it is above (a fraction: the item reflows when
    // the window turns).
    let reading = /** @type {Element | null} */ (null), readingAt = 0, readingIn = 0;

    /** The top of what s shows, in the window's coordinates. @param {Element} s */
    const topOf = (s) => (s === doc.scrollingElement ? 0 : s.getBoundingClientRect().top);

    /** Notes the item at the top of what s shows (a binary search: items are in order). @param {Element} s */
    function noteReading(s) {
        const top = topOf(s), all = items.children;
        let lo = 0, hi = all.length;
        while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (all[mid].getBoundingClientRect().bottom <= top) lo = mid + 1;
            else hi = mid;
        }
        reading = all[lo] ?? null;
        const r = reading?.getBoundingClientRect();
        readingAt = r ? r.top - top : 0;
        readingIn = r && readingAt < 0 && r.height > 0 ? -readingAt / r.height : 0;
    }

    /**
     * Reads where the reader is, if the scroller moved since follow left it
     * (its scroll event comes with the next frame, and new text may come
     * first). Near the bottom of the content now, or still near that of
     * the content then, is there: the browser moves it too, by a few pixels when an
     * item above changes (scroll anchoring), or down to a bottom that came
     * up. Another scroller than follow's (the window crossed the short
     * height, or none yet) is taken as where the reader is, and read from
     * then on: its bottom is there (the reader may have scrolled it before
     * its first event reached the page), and elsewhere in it a reader who
     * was at the bottom of the other one still is; one who was not is
     * taken back to the item they were reading (the new one starts at its
     * top).
     * @param {Element} s
     */
    function read(s) {
        const below = (/** @type {number} */ height) => height - s.scrollTop - s.clientHeight;
        if (s !== leftIn) {
            const switched = leftIn !== null;
            there ||= below(s.scrollHeight) < NEAR;
            if (switched && !there && reading?.isConnected) {
                const r = reading.getBoundingClientRect();
                s.scrollTop += (readingIn > 0 ? r.top + readingIn * r.height : r.top - readingAt) - topOf(s);
                there = below(s.scrollHeight) < NEAR; // put back at the bottom: there
            }
            leftIn = s;
            leftAt = s.scrollTop;
            leftHeight = s.scrollHeight;
            return;
        }
        if (s.scrollTop === leftAt) return;
        // The content as it was counts for staying, not for coming back:
        // a reader who scrolls down to where the text was is reading it.
        there = below(s.scrollHeight) < NEAR || (there && below(leftHeight) < NEAR);
        if (!there) noteReading(s);
    }

    /** Follows now: reads where the reader is, and moves to the bottom. */
    function followNow() {
        // An empty log (a new chat, or one about to load) has nothing to
        // follow: what shows in its place (a welcome) says where the page
        // is, and what comes next is followed from its start.
        if (!items.firstElementChild) {
            there = true;
            leftIn = null;
            return;
        }
        const s = scroller();
        read(s);
        if (!there) return;
        s.scrollTop = s.scrollHeight;
        leftIn = s;
        leftAt = s.scrollTop;
        leftHeight = s.scrollHeight;
    }
    // Once a frame: each follow reads the log's layout, which every
    // change before it made stale, and a chat's replay makes thousands of
    // changes at once (a long chat took minutes to open).
    let queued = 0;
    function follow() {
        if (!win) return followNow();
        if (queued) return;
        queued = win.requestAnimationFrame(() => {
            queued = 0;
            followNow();
        });
    }
    const onScroll = () => read(scroller());
    log.addEventListener("scroll", onScroll, { passive: true });
    win?.addEventListener("scroll", onScroll, { passive: true });
    // A window resized keeps its reader at the bottom: the log's bottom
    // moves, or the page takes over the scrolling (or gives it back).
    win?.addEventListener("resize", follow, { passive: true });
    // A part shown or hidden (a log shown whole once its chat is replayed) moves the bottom too.
    const added = new MutationObserver(follow);
    added.observe(log, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
    return {
        follow,
        stick() {
            there = true;
            leftIn = null;
        },
        unmount() {
            if (queued) win?.cancelAnimationFrame(queued);
            added.disconnect();
            log.removeEventListener("scroll", onScroll);
            win?.removeEventListener("scroll", onScroll);
            win?.removeEventListener("resize", follow);
        },
    };
}
