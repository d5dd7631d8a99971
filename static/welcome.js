/**
 * welcome.js: the chat page's empty screen. While the conversation has
 * nothing in it (a new chat, New chat, a session the gateway forgot), the
 * page shows a greeting and suggested prompts instead of a blank log; a click
 * on one sends it, as if typed. `<main data-chat>` carries `data-empty` so the
 * stylesheet gives the screen the log's room.
 *
 * Notices alone (a message refused for its size) leave the conversation
 * empty: they show above the suggestions.
 *
 * A chat that is being opened (a switch, a reload whose copy was too large
 * to keep) is not empty until the gateway has replayed it: the screen waits
 * for `session.opened`'s seq, so it never flashes before the messages.
 * Its log stays hidden until then too, when the replay fills an empty log
 * (a switch, that reload): a long chat's replay is thousands of changes,
 * and a log shown is laid out again at each frame of it (a 1,000-turn chat
 * took 10 s to open); hidden, it is laid out once, whole. A connection lost
 * on the way shows what came.
 *
 * Exports: mountWelcome(root, client, options).
 *
 * @example
 * mountWelcome(main, client, { suggestions: ["what time is it"], send: (text) => chat.send(text) });
 *
 * @module welcome
 */

import { clone, must } from "./dom.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */

/**
 * Shows root's empty screen while the conversation is empty.
 * @param {HTMLElement} root  The element with data-chat (web.ChatPage's <main>).
 * @param {GatewayClient} client
 * @param {{suggestions?: string[], send: (text: string) => unknown}} options
 *     suggestions: the prompts offered; send: sends one (mountChat's send,
 *     so it shows like a typed message).
 * @returns {{unmount(): void}}
 */
export function mountWelcome(root, client, { suggestions = [], send }) {
    const doc = root.ownerDocument;
    const screen = must(root, "[data-testid=empty-chat]");
    const log = must(root, "[data-testid=message-list]");
    const prompt = must(root, "[data-testid=prompt]");

    for (const text of suggestions) {
        const li = clone(doc, "tpl-suggestion");
        const button = must(li, "[data-testid=suggestion]");
        button.textContent = text;
        button.addEventListener("click", () => {
            // The screen goes away with the message: the focus goes where the next one is typed.
            prompt.focus({ preventScroll: true });
            send(text);
        });
        must(screen, "[data-testid=suggestions]").append(li);
    }

    // The page has the whole conversation once it holds the seq session.opened
    // said; a session not opened yet that has an id is being fetched.
    // loading: the log is hidden until then.
    let opened = false, until = 0, loading = false;
    const messages = must(root, "[data-testid=messages]");
    /**
     * Hides the log while its chat is replayed, and says so: the page
     * shows "Loading…" in its place (data-loading), and the log is busy
     * to screen readers, which read it once it is whole.
     * @param {boolean} on
     */
    function setLoading(on) {
        loading = log.hidden = on;
        if (on) {
            root.dataset.loading = "true";
            messages.setAttribute("aria-busy", "true");
        } else {
            delete root.dataset.loading;
            messages.removeAttribute("aria-busy");
        }
    }

    let was = ""; // what update last made of the page, to do nothing at each frame of a replay
    function update() {
        const known = client.session === null || (opened && client.seq >= until);
        if (loading && known) setLoading(false);
        // Nothing said: notices alone (a message refused for its size, a
        // chat that would not open) leave the suggestions, below them.
        const empty = known && !log.querySelector(":scope > :not([data-testid=notice])");
        // firstElementChild, not childElementCount, which counts them all: this runs at each event.
        const now = `${empty} ${!log.firstElementChild}`;
        if (now === was) return;
        was = now;
        const shown = empty && screen.hidden;
        screen.hidden = !empty;
        // Shown again (New chat after a long chat, in a short window where
        // the page scrolls): from its greeting, not wherever the page was;
        // at the next frame, once the log's own follow has scrolled.
        if (shown) doc.defaultView?.requestAnimationFrame(() => {
            const top = screen.hidden ? 0 : screen.getBoundingClientRect().top;
            if (top < 0) doc.scrollingElement?.scrollBy(0, top);
        });
        root.dataset.empty = String(empty);
        // The log is a Tab stop for scrolling it with the keys; empty, it is a stop on nothing.
        messages.tabIndex = log.firstElementChild ? 0 : -1;
    }

    const observer = new MutationObserver(update);
    observer.observe(log, { childList: true });
    const offs = [
        client.on("opened", ({ seq }) => {
            opened = true;
            until = typeof seq === "number" ? seq : 0;
            // Notices alone (a refused open) wait with the rest.
            setLoading(until > client.seq && !log.querySelector(":scope > :not([data-testid=notice])"));
            update();
        }),
        client.on("reset", () => {
            opened = false;
            until = 0;
            setLoading(false);
            // open(id) names the session it opens just after the reset.
            queueMicrotask(update);
        }),
        client.on("state", ({ state }) => {
            if (state === "closed" && loading) setLoading(false);
            update();
        }),
        client.on("frame", update),
    ];
    update();

    return {
        /** Stops following the client. */
        unmount() {
            offs.forEach((off) => off());
            observer.disconnect();
        },
    };
}
