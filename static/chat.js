/**
 * chat.js renders a GatewayClient's events into the chat page that
 * web.ChatPage serves: the message log with streaming Markdown (reply.js),
 * a compact card per tool call (toolcard.js), errors in words (errors.js), a
 * "Thinking…" indicator until the model's first word (saying why when the
 * model's request is tried again: model.retrying), and the composer
 * (composer.js: Enter sends, Send becomes Stop while a turn runs); a
 * message sent mid-turn shows at once as queued. What screen readers hear
 * is announce.js's: the log is not a live region. It clones the
 * page's <template> elements, so the markup lives in web/chat.templ; the
 * test ids are listed in docs/ui.md.
 *
 * @example
 * import { connect } from "/static/gateway.js";
 * import { mountChat } from "/static/chat.js";
 * const client = connect({ tools });
 * const chat = mountChat(document.querySelector("[data-chat]"), client);
 * // A tool that needs the user renders into its own card:
 * const slot = chat.toolSlot(call.id, call.name);
 *
 * @module chat
 */

import { isSettled } from "./cards.js";
import { FRAME_ERROR, SESSION_ERROR, STOP_REASON, TOOL_ERROR } from "./codes.js";
import { renderMarkdown } from "./markdown.js";
import { streamReply } from "./reply.js";
import { renderToolCard, subagentCalls, tickAll } from "./toolcard.js";
import { mountStatus } from "./status.js";
import { mountAnnouncer } from "./announce.js";
import { mountComposer } from "./composer.js";
import { endedText, modelErrorText, retryHelps, retryingText, sessionErrorText } from "./errors.js";
import { clone, idPart, must } from "./dom.js";
import { followLog } from "./follow.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */
/** @typedef {import("./gateway.js").ToolCard} ToolCard */

/** What a turn that ended blank says, by its stop reason: else a user could not tell it from a model that said nothing. */
const WITHHELD = /** @type {Record<string, string>} */ ({
    [STOP_REASON.REFUSAL]: "The model declined to answer.",
    [STOP_REASON.CONTENT_FILTER]: "The provider's content filter withheld the reply.",
});

/**
 * Renders client into root and wires the composer.
 * @param {HTMLElement} root  The element with data-chat (web.ChatPage's <main>).
 * @param {GatewayClient} client
 */
export function mountChat(root, client) {
    const doc = root.ownerDocument;
    const log = must(root, "[data-testid=messages]");
    const list = must(log, "[data-testid=message-list]");
    const thinking = must(log, "[data-testid=thinking]");
    const thinkingText = must(thinking, "[data-testid=thinking-text]");
    const THINKING = thinkingText.textContent ?? "";
    const form = /** @type {HTMLFormElement} */ (must(root, "[data-testid=composer]"));
    const prompt = /** @type {HTMLTextAreaElement} */ (must(form, "[data-testid=prompt]"));
    const voice = mountAnnouncer(must(doc, "[data-testid=announcer]"), client);
    const composer = mountComposer(form, {
        submit,
        cancel() {
            stopped = true; // the calls Stop cancels are not followed by a model turn
            client.cancel();
            setBusy();
        },
    });

    /** @type {Map<string, HTMLElement>} */
    const cards = new Map();
    /** @type {Map<string, ToolCard>} the last state of each card, for its ticking time */
    const cardState = new Map();
    /** The cards whose time counts down, and those not settled, by id (not a pass over every card at each event). */
    const live = new Set(), unsettled = new Set();
    const reply = streamReply(() => messageItem("assistant"));
    /** @type {{el: HTMLElement, text: string}[]} messages sent, not yet taken by the gateway, oldest first */
    let pending = [];
    let busy = false, ticker = 0;
    // The model is due to answer: a message went or was taken, or the turn's
    // calls all settled; a word, the turn's end, Stop or idleness ends it.
    let awaiting = false, stopped = false;
    // "Stopped." was said of this turn; a turn stopped at its calls has no
    // model.finished to say it, and says it at its end (stopAt, the seq of
    // its first call cancelled) unless the session ended, which cancels
    // them too. eventSeq: the session event being handled.
    let stopSaid = false, stopAt = 0, eventSeq = 0;
    let lastUser = ""; // the last user message of the conversation: what Retry sends again
    let refusal = ""; // the code of the gateway's last refusal of session.open, said once (its text counts down)
    let afterReset = ""; // a notice for the new chat the SDK opens next
    /** The Retry buttons shown since the last user message (not a search of the log at each). */
    const retries = new Set();

    /** Busy or not, and whatever follows from it: Send or Stop, the indicator. */
    function setBusy(on = busy) {
        busy = on;
        // Written only when they change: this runs at each event of a replay.
        if (root.dataset.busy !== String(on)) root.dataset.busy = String(on);
        composer.running(on);
        if (!on) awaiting = false;
        // Offline, nothing is thinking: the status line says what is.
        const hide = !(on && awaiting && !reply.streaming && client.state === "open");
        if (thinking.hidden !== hide) thinking.hidden = hide;
        // A retry's words last until the turn's first.
        if (hide && thinkingText.textContent !== THINKING) thinkingText.textContent = THINKING;
        followBottom();
    }

    // The log follows new content while the reader is at its bottom.
    const { follow: followBottom, stick, unmount: stopFollowing } = followLog(log, list);

    /** Adds to the log, above the queued messages, which wait at its bottom. */
    function append(/** @type {HTMLElement} */ el) {
        list.insertBefore(el, pending[0]?.el ?? null);
        followBottom();
    }

    /** A new message in the log; last: below the queued ones too (one just sent). */
    function messageItem(/** @type {string} */ role, last = false) {
        const el = clone(doc, "tpl-message");
        el.dataset.role = role;
        must(el, "[data-testid=message-role]").textContent = role === "user" ? "You" : "Assistant";
        if (last) list.append(el);
        else append(el);
        return el;
    }

    /**
     * A line in the log that is not a message, said aloud unless it is about
     * an event that is history (seq: announce.js); with retry, a Retry
     * button that sends the last user message again.
     * @param {string} kind @param {string} text @param {{retry?: boolean, seq?: number}} [opts]
     */
    function notice(kind, text, opts = {}) {
        voice.say(text, opts.seq);
        const el = clone(doc, "tpl-notice");
        el.dataset.kind = kind;
        must(el, "[data-testid=notice-text]").textContent = text;
        const retry = /** @type {HTMLButtonElement} */ (must(el, "[data-testid=retry]"));
        retry.hidden = !(opts.retry && lastUser);
        if (!retry.hidden) retries.add(retry);
        retry.addEventListener("click", () => {
            retry.disabled = true;
            prompt.focus({ preventScroll: true }); // not lost with the disabled button; the composer is always in view
            if (!submit(lastUser)) retry.disabled = false;
        });
        append(el);
    }

    /** Says "Stopped." of the turn, once. @param {number} [seq] */
    function stoppedNotice(seq) {
        if (!stopSaid) notice("info", "Stopped.", { seq });
        stopSaid = true;
        stopAt = 0;
    }

    /** The turn is over: a Stop at its calls is said; the next turn's may be. */
    function turnOver() {
        if (stopAt) stoppedNotice(stopAt);
        stopSaid = false;
    }

    /** A call's card; a sub-agent's call goes in its parent's card. @param {string} id @param {string} [name] @param {string | null} [parent] */
    function cardFor(id, name, parent = null) {
        let el = cards.get(id);
        if (!el) {
            el = clone(doc, "tpl-tool-card");
            el.dataset.toolId = id;
            el.id = `tool-${idPart(id)}`;
            cards.set(id, el);
            const host = parent ? cards.get(parent) : undefined;
            if (host) subagentCalls(host).append(el);
            else append(el);
        }
        if (name) {
            el.dataset.toolName = name;
            must(el, "[data-testid=tool-name]").textContent = name;
        }
        return el;
    }

    /** Ticks the running cards' countdowns every second, while there are any. */
    function tick() {
        const any = tickAll(cards, cardState, live, Date.now() + client.clockSkew);
        if (any && !ticker) ticker = setInterval(tick, 1000);
        else if (!any && ticker) ticker = (clearInterval(ticker), 0);
    }

    /**
     * Sends text as the user's message and shows it at once: queued while a
     * turn runs (or the connection is down) until the gateway takes it.
     * Returns false when the SDK refused it (over the gateway's limits: its
     * error event said why).
     * @param {string} text
     */
    function submit(text) {
        try {
            client.send(text);
        } catch (err) {
            if (/** @type {any} */ (err)?.code === FRAME_ERROR.LIMIT_EXCEEDED) return false;
            throw err;
        }
        const queued = busy || client.state !== "open";
        const el = messageItem("user", true);
        must(el, "[data-testid=message-text]").textContent = text;
        markQueued(el, queued);
        pending.push({ el, text });
        stick();
        if (!busy) awaiting = true;
        setBusy(true);
        return true;
    }

    function markQueued(/** @type {HTMLElement} */ el, /** @type {boolean} */ on) {
        if (on) el.dataset.queued = "true";
        else delete el.dataset.queued;
        must(el, "[data-testid=message-queued]").hidden = !on;
    }

    /** Takes a sent message back off the log (refused), by its text, or the newest. */
    function unsend(/** @type {string | undefined} */ text) {
        const i = text === undefined ? pending.length - 1 : pending.findIndex((p) => p.text === text);
        if (i < 0) return undefined;
        const [p] = pending.splice(i, 1);
        p.el.remove();
        return p.text;
    }

    const offs = [
        client.on("reset", () => {
            list.replaceChildren();
            prompt.disabled = false; // an ended conversation's box is closed; a new one's is open
            cards.clear();
            cardState.clear();
            live.clear();
            unsettled.clear();
            tick();
            reply.reset();
            pending = [];
            lastUser = "";
            setBusy(false);
            if (afterReset) notice("error", afterReset);
            afterReset = "";
        }),
        mountStatus(must(doc, "[data-testid=connection-status]"), client),
        voice.off,
        client.on("state", ({ state }) => {
            root.dataset.connection = state;
            if (state === "open") refusal = "";
            setBusy();
        }),
        client.on("message", ({ message }) => {
            if (message.role === "user") {
                const content = message.content ?? "";
                lastUser = content;
                // An error's Retry is over once the conversation moves on.
                retries.forEach((b) => { b.disabled = true; });
                retries.clear();
                // The gateway took one of ours: it loses its mark, where it is.
                const i = pending.findIndex((p) => p.text === content);
                if (i >= 0) markQueued(pending.splice(i, 1)[0].el, false);
                else must(messageItem("user"), "[data-testid=message-text]").textContent = content;
                turnOver();
                awaiting = true;
                stopped = false;
                setBusy(true);
            } else if (message.role === "assistant") {
                const el = reply.claim(message.content ?? "");
                if (!message.content && !el) return; // tool uses only: their cards follow
                const target = el ?? messageItem("assistant");
                if (!el) renderMarkdown(must(target, "[data-testid=message-text]"), message.content ?? "");
                reply.finish(target);
                setBusy();
            }
        }),
        client.on("model.retrying", ({ error, attempt, attempts, seq, replayed }) => {
            const text = retryingText(error, attempt + 1, attempts);
            thinkingText.textContent = text;
            if (!replayed) voice.say(text, seq); // a past wait, its reply next in the replay, goes unsaid
        }),
        client.on("delta", ({ text }) => {
            const first = !reply.streaming;
            reply.delta(text);
            if (first || !busy) setBusy(true); // a reply's next words change nothing it shows
        }),
        client.on("discarded", () => {
            reply.discard(); // a restart cut the turn: its partial text goes; the turn streams anew
            thinkingText.textContent = THINKING;
            setBusy();
        }),
        client.on("model.finished", ({ error, stopReason, seq }) => {
            awaiting = false;
            const blank = !reply.streaming;
            reply.end();
            // Said once, here; the error event that follows goes to the console.
            if (error) {
                console.warn(`The model failed: ${error}`);
                notice("error", modelErrorText(error), { retry: retryHelps(error), seq });
            } else if (stopReason === STOP_REASON.CANCELLED) stoppedNotice(seq);
            else if (blank && WITHHELD[stopReason]) notice("info", WITHHELD[stopReason], { seq });
            setBusy();
        }),
        client.on("frame", (f) => {
            if (typeof f?.seq === "number") eventSeq = f.seq;
        }),
        client.on("tool", (card) => {
            const was = cardState.get(card.id)?.status;
            cardState.set(card.id, card);
            // Stop while the turn waited for its calls: said as of a reply.
            if (card.code === TOOL_ERROR.CANCELLED && !card.parent && !(was && isSettled(was))) stopAt ||= eventSeq;
            if (renderToolCard(cardFor(card.id, card.name, card.parent), card, Date.now() + client.clockSkew)) live.add(card.id);
            else live.delete(card.id);
            tick();
            if (isSettled(card.status)) unsettled.delete(card.id);
            else unsettled.add(card.id);
            // The last open call settled: the model reads the results next.
            awaiting = unsettled.size === 0 && isSettled(card.status) && !card.replayed && !stopped;
            setBusy(busy || card.status === "running");
        }),
        client.on("idle", () => { turnOver(); setBusy(false); }),
        // A limit stopped the model: say why, in the gateway's words.
        client.on("guard", ({ message, guard, seq }) => {
            awaiting = false;
            notice("guard", message || `Stopped by the ${guard} limit.`, { seq });
            setBusy();
        }),
        client.on("client.event", ({ name, data, seq }) => {
            notice("event", data === undefined ? name : `${name}: ${JSON.stringify(data)}`, { seq });
        }),
        client.on("error", ({ code, message, seq, refused, retrying }) => {
            // Session errors are part of the conversation, in words; their
            // details (and refused frames) are for the console.
            if (seq !== undefined) {
                console.warn(`session error ${code}: ${message}`);
                if (code !== SESSION_ERROR.MODEL_FAILED) notice("error", sessionErrorText(code), { seq });
            } else if (refused?.type === "message") {
                // Over the gateway's limits, never sent. The box still holds
                // it when send() refused it; one queued offline is given back.
                unsend(refused.content);
                notice("error", `Your message was not sent: ${message}`);
                if (!prompt.value) prompt.value = refused.content;
                if (!pending.length) setBusy(false);
            } else if (code === FRAME_ERROR.STORE_UNAVAILABLE) {
                // The message was not taken: say so, and give its text back.
                const text = unsend(undefined);
                notice("error", `Your message was not sent: ${message}`);
                if (!prompt.value && text) prompt.value = text;
                setBusy(false);
            } else if (code === FRAME_ERROR.SESSION_UNREADABLE) {
                afterReset = "That chat could not be opened: the gateway cannot read what it stored of it. This is a new chat.";
            } else if (retrying) {
                // session.open refused, and the SDK tries again: the page says so once.
                if (code !== refusal) notice("error", `The chat could not be opened: ${message}`);
                refusal = code;
            } else console.warn(`gateway refused a frame: ${code}: ${message}`);
        }),
        client.on("ended", ({ reason, seq }) => {
            stopAt = 0; // its calls were cancelled by the end, not a Stop
            notice("info", endedText(reason), { seq });
            setBusy(false);
            prompt.disabled = true;
        }),
    ];
    setBusy(false);

    return {
        /**
         * The element inside a call's card where a tool may render UI of its
         * own (a question, buttons). Creates the card if it is not shown yet.
         * @param {string} id @param {string} [name] @returns {HTMLElement}
         */
        toolSlot(id, name) {
            return must(cardFor(id, name), "[data-testid=tool-slot]");
        },
        /** Sends text as if typed; false when it is over the gateway's limits (a notice says so). @param {string} text */
        send(text) {
            return submit(text);
        },
        /** A copy of the page's <template id=...> content's first element. @param {string} id */
        clone(id) {
            return clone(doc, id);
        },
        /** Says text to screen readers (a polite live region), as a tool's question. @param {string} text */
        announce(text) {
            voice.say(text);
        },
        /** Whether a turn or a call is running. */
        get busy() {
            return busy;
        },
        /** Stops rendering. */
        unmount() {
            offs.forEach((off) => off());
            clearInterval(ticker);
            reply.reset();
            stopFollowing();
        },
    };
}
