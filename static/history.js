/**
 * history.js: the chat page's list of this browser's chats and New chat.
 * The list is the gateway's `GET /sessions` (the browser's cookie says whose),
 * newest first, each chat by its title (its first message); chats without a
 * title yet (nothing said) are left out. Clicking one switches this tab to it
 * with the SDK's `client.open(id)`, which replays it from the start; the chat
 * shown is marked `aria-current`. New chat is `client.reset()`, unless the
 * chat shown has nothing in it yet. Each chat's × deletes it, once the user
 * confirms, with `DELETE /sessions/{id}` (the list's url and the id): gone
 * from the gateway, its pages told (`ended`, reason "deleted"); the chat
 * shown, deleted, gives way to a new one. A chat deleted while the page
 * looks on (here, or in another tab that showed the one this tab shows)
 * stays out of the list, though a list asked for before its purge has it.
 *
 * The list is asked for again when a session opens (the page loaded, a switch,
 * New chat, a reconnect after a restart), when a message of the user's
 * arrives (a first one gives a chat its title; any other moves it up), when
 * a turn ends and when the session ends (another tab may have deleted it). Never while the connection is down: the gateway is away, and
 * the next `opened` asks anyway.
 *
 * Exports: mountHistory(nav, client, options).
 *
 * @example
 * mountHistory(document.querySelector("[data-testid=history]"), client);
 *
 * @module history
 */

import { clone, must } from "./dom.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */
/** @typedef {{id: string, title: string, created: string, updated: string, ended?: boolean}} ChatSummary */

/** How long to wait before asking again for a title the gateway has not stored yet (ms), and how often. */
const TITLE_RETRY_MS = 300, TITLE_RETRIES = 5;

/**
 * Fills nav's list from the gateway and wires switching and New chat.
 * @param {HTMLElement} nav  The element with data-testid=history (web.ChatPage's <nav>).
 * @param {GatewayClient} client
 * @param {{url?: string, announce?: (text: string) => void}} [options]  url: the
 *   list's endpoint, default "/sessions"; announce: says which chat opened, to
 *   screen readers (chat.announce), since a switch replays a chat silently.
 * @returns {{refresh(): Promise<void>, unmount(): void}}
 */
export function mountHistory(nav, client, { url = "/sessions", announce = () => {} } = {}) {
    const doc = nav.ownerDocument;
    const list = must(nav, "[data-testid=history-list]");
    const none = must(nav, "[data-testid=history-empty]");
    const newChat = must(nav, "[data-testid=new-chat]");

    /** @type {ChatSummary[] | null} the gateway's last answer; null before the first */
    let chats = null;
    /** @type {Promise<void> | null} the request out, and the one asked for while it was (forced, when any of those asks was) */
    let loading = null, again = null;
    let againForced = false, retries = 0, retryTimer = 0;
    /** @type {string | null} the chat last scrolled into view */
    let scrolledTo = null;
    /**
     * The chats deleted while this page looked on (here, or in another tab
     * that showed the one this tab shows): the gateway tells a chat's pages
     * it ended before it purges the chat, and a list asked for in between
     * has it still.
     * @type {Set<string>}
     */
    const deleted = new Set();

    /**
     * Asks the gateway for the list; one request at a time, the last ask
     * wins. Not while the connection is down, unless forced (the session
     * ended, and its socket with it: the gateway is there). Resolves once a
     * list asked for after this call is shown, so a caller that changed the
     * list (a deletion) sees its change.
     * @returns {Promise<void>}
     */
    function refresh(force = false) {
        if (!force && client.state !== "open") return Promise.resolve();
        if (!loading) {
            loading = load().finally(() => { loading = null; });
            return loading;
        }
        againForced ||= force;
        again ??= loading.then(() => {
            const forced = againForced;
            again = null;
            againForced = false;
            return refresh(forced);
        });
        return again;
    }

    /** Fetches the list and shows it; a failure leaves the last one shown. */
    async function load() {
        try {
            const res = await fetch(url, { credentials: "same-origin", cache: "no-store" });
            if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
            const body = await res.json();
            chats = Array.isArray(body?.sessions) ? body.sessions : [];
            render();
            awaitTitle();
        } catch (err) {
            // The list is a convenience: the chat works without it.
            console.warn(`could not list the chats: ${err}`);
        }
    }

    /**
     * The gateway stores a chat's title just after the page sees its first
     * message, so a list asked for at that moment may not have it yet: ask
     * again, a few times.
     */
    function awaitTitle() {
        const said = client.events.some((e) => e.type === "message" && e.message?.role === "user");
        const titled = chats?.some((c) => c.id === client.session && c.title);
        if (!said || titled) retries = 0;
        else if (retries < TITLE_RETRIES && !retryTimer) {
            retries++;
            retryTimer = setTimeout(() => {
                retryTimer = 0;
                void refresh();
            }, TITLE_RETRY_MS);
        }
    }

    function render() {
        if (!chats) return;
        // Keep the focus where it was, a chat or its ×: the list is rebuilt,
        // now and then while the user is in it (a turn ended, a title came).
        const focused = /** @type {HTMLElement | null} */ (doc.activeElement)?.closest?.("[data-testid=history-item], [data-testid=history-delete]");
        const refocus = focused instanceof HTMLElement && list.contains(focused) && focused.dataset.session
            ? `[data-testid="${focused.dataset.testid}"][data-session="${CSS.escape(focused.dataset.session)}"]`
            : "";
        const items = chats.filter((c) => c.title && !deleted.has(c.id)).map((c) => {
            const li = clone(doc, "tpl-history-item");
            const button = /** @type {HTMLButtonElement} */ (must(li, "[data-testid=history-item]"));
            button.dataset.session = c.id;
            button.textContent = c.title;
            button.title = c.title; // the whole title, where the list cuts it short
            if (c.id === client.session) button.setAttribute("aria-current", "true");
            if (c.ended) {
                button.disabled = true;
                button.dataset.ended = "true";
                button.append(" (ended)");
            }
            const del = must(li, "[data-testid=history-delete]");
            del.dataset.session = c.id;
            del.setAttribute("aria-label", `Delete the chat ${c.title}`);
            del.title = "Delete this chat";
            return li;
        });
        list.replaceChildren(...items);
        none.hidden = items.length > 0;
        if (refocus) /** @type {HTMLElement | null} */ (list.querySelector(refocus))?.focus({ preventScroll: true });
        // The chat shown, in view once it is marked (a phone's strip scrolls
        // sideways): not at each refresh, which would undo the user's scroll.
        const current = list.querySelector("[aria-current]");
        if (current && client.session !== scrolledTo) {
            scrolledTo = client.session;
            reveal(current);
        }
    }

    /**
     * Scrolls the list's own box (the nav: a column, or a phone's strip) to
     * show item, and nothing else: scrollIntoView scrolls every box around it,
     * and in a short window, where the page scrolls, it took a reader
     * following a streamed reply up to the strip, and the reply on without
     * them. @param {Element} item
     */
    function reveal(item) {
        const box = nav.getBoundingClientRect(), at = item.getBoundingClientRect();
        const past = (/** @type {number} */ lo, /** @type {number} */ hi, /** @type {number} */ from, /** @type {number} */ to) =>
            lo < from ? lo - from : hi > to ? Math.min(hi - to, lo - from) : 0;
        nav.scrollBy(past(at.left, at.right, box.left, box.right), past(at.top, at.bottom, box.top, box.bottom));
    }

    /**
     * Deletes a chat, once the user confirms: the gateway's answer is said,
     * and the list asked for again. @param {string} id @param {string} title
     */
    async function remove(id, title) {
        if (!doc.defaultView?.confirm(`Delete the chat "${title}"? It cannot be brought back.`)) return;
        const shown = id === client.session;
        const at = [...list.querySelectorAll("[data-testid=history-delete]")].findIndex((b) => b instanceof HTMLElement && b.dataset.session === id);
        try {
            const res = await fetch(`${url}/${encodeURIComponent(id)}`, { method: "DELETE", credentials: "same-origin" });
            // 404: gone already (another tab deleted it, or --retain did).
            if (!res.ok && res.status !== 404) throw new Error((await res.text()) || `${res.status} ${res.statusText}`);
            deleted.add(id);
            if (shown) client.reset();
            announce(`Deleted the chat ${title}.`);
        } catch (err) {
            doc.defaultView?.alert(`The chat "${title}" was not deleted: ${err instanceof Error ? err.message : err}`);
        }
        await refresh();
        // The focus goes to the next chat's ×, where one clearing the list
        // goes on; to the box when the chat shown went, or the list is empty.
        const dels = list.querySelectorAll("[data-testid=history-delete]");
        const next = dels[Math.min(Math.max(at, 0), dels.length - 1)];
        if (shown || !(next instanceof HTMLElement)) focusPrompt();
        else next.focus({ preventScroll: true });
    }

    list.addEventListener("click", (e) => {
        const del = /** @type {HTMLElement} */ (e.target).closest?.("[data-testid=history-delete]");
        if (del instanceof HTMLElement && del.dataset.session) {
            const title = chats?.find((c) => c.id === del.dataset.session)?.title ?? "";
            void remove(del.dataset.session, title);
            return;
        }
        const item = /** @type {HTMLElement} */ (e.target).closest?.("[data-testid=history-item]");
        const id = item instanceof HTMLElement ? item.dataset.session : undefined;
        if (!id || id === client.session) return;
        client.open(id);
        render();
        focusPrompt();
        announce(`Opened the chat ${item.title}.`);
    });
    newChat.addEventListener("click", () => {
        // A chat with nothing in it (welcome.js's data-empty) is a new chat
        // already, unless it ended (its box closed): another would be one
        // more session, refused past the browser's limits, for each click.
        const empty = /** @type {HTMLElement | null} */ (doc.querySelector("[data-chat]"))?.dataset.empty === "true";
        const ended = /** @type {HTMLTextAreaElement | null} */ (doc.querySelector("[data-testid=prompt]"))?.disabled;
        if (!empty || ended) client.reset();
        focusPrompt();
        announce("New chat.");
    });

    // The message box is always in view (in a short window, stuck to the
    // screen's bottom): focusing it must not scroll the page, which the
    // page's scroll padding would do, taking a new chat's welcome away.
    function focusPrompt() {
        /** @type {HTMLElement | null} */ (doc.querySelector("[data-testid=prompt]"))?.focus({ preventScroll: true });
    }

    const offs = [
        client.on("opened", () => void refresh()),
        client.on("reset", render),
        client.on("message", ({ message, replayed }) => {
            if (!replayed && message.role === "user") void refresh();
        }),
        client.on("idle", ({ replayed }) => {
            if (!replayed) void refresh();
        }),
        client.on("ended", ({ replayed, reason }) => {
            if (replayed) return;
            if (reason === "deleted" && client.session) {
                deleted.add(client.session); // in another tab
                render();
            }
            void refresh(true);
        }),
    ];

    return {
        /** Asks the gateway for the list now. */
        refresh,
        /** Stops following the client. */
        unmount() {
            offs.forEach((off) => off());
            clearTimeout(retryTimer);
        },
    };
}
