/**
 * chat.js renders a GatewayClient's events into the chat page that
 * web.ChatPage serves: the message log with streaming text, a card per tool
 * call, the composer (Enter sends, Shift+Enter is a new line, Stop cancels)
 * and the connection status. It clones the page's <template> elements, so the
 * markup lives in web/chat.templ; the test ids are listed in docs/ui.md.
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

import { FRAME_ERROR } from "./codes.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */
/** @typedef {import("./gateway.js").ToolCard} ToolCard */

const STATE_TEXT = { connecting: "Connecting…", open: "Connected", closed: "Offline" };
/** What a running client call's card says when this tab does not run it. */
const WHERE_TEXT = { elsewhere: "Running in another tab", waiting: "Waiting for the page" };

/**
 * Renders client into root and wires the composer.
 * @param {HTMLElement} root  The element with data-chat (web.ChatPage's <main>).
 * @param {GatewayClient} client
 */
export function mountChat(root, client) {
    const doc = root.ownerDocument;
    const log = /** @type {HTMLOListElement} */ (must(root, "[data-testid=messages]"));
    const form = /** @type {HTMLFormElement} */ (must(root, "[data-testid=composer]"));
    const prompt = /** @type {HTMLTextAreaElement} */ (must(form, "[data-testid=prompt]"));
    const stop = /** @type {HTMLButtonElement} */ (must(form, "[data-testid=stop]"));
    const status = must(doc, "[data-testid=connection-status]");
    const newChat = doc.querySelector("[data-testid=new-chat]");

    /** @type {Map<string, HTMLElement>} */
    const cards = new Map();
    /** @type {HTMLElement | null} the assistant message the current turn streams into */
    let streaming = null;
    /** @type {HTMLElement | null} a finished turn's text, waiting for its transcript message */
    let unclaimed = null;
    let busy = false;
    let lastSent = ""; // the last message sent, given back if the gateway refuses it

    function setBusy(on) {
        busy = on;
        log.setAttribute("aria-busy", String(on));
        root.dataset.busy = String(on);
        stop.disabled = !on;
    }
    setBusy(false);

    // The log follows new content while the reader is at its bottom, and
    // stays put once they scroll up to read.
    let stick = true;
    log.addEventListener("scroll", () => {
        stick = log.scrollHeight - log.scrollTop - log.clientHeight < 48;
    }, { passive: true });
    function followBottom() {
        if (stick) log.scrollTop = log.scrollHeight;
    }
    // Whatever changes the log (streamed text, a card, a tool's own UI in its
    // slot) keeps it at the bottom for a reader who is there.
    new MutationObserver(followBottom).observe(log, { childList: true, subtree: true, characterData: true });

    function append(/** @type {HTMLElement} */ el) {
        log.append(el);
        followBottom();
    }

    function messageItem(/** @type {string} */ role) {
        const el = clone(doc, "tpl-message");
        el.dataset.role = role;
        must(el, "[data-testid=message-role]").textContent = role === "user" ? "You" : "Assistant";
        append(el);
        return el;
    }

    function assistantTurn() {
        if (!streaming) {
            streaming = messageItem("assistant");
            streaming.dataset.streaming = "true";
            streaming.setAttribute("aria-busy", "true");
        }
        return streaming;
    }

    function finishStreaming(/** @type {HTMLElement} */ el) {
        el.dataset.streaming = "false";
        el.removeAttribute("aria-busy");
    }

    function notice(/** @type {string} */ kind, /** @type {string} */ text) {
        const el = clone(doc, "tpl-notice");
        el.dataset.kind = kind;
        must(el, "[data-testid=notice-text]").textContent = text;
        append(el);
    }

    /** @param {string} id @param {string} [name] */
    function cardFor(id, name) {
        let el = cards.get(id);
        if (!el) {
            el = clone(doc, "tpl-tool-card");
            el.dataset.toolId = id;
            el.id = `tool-${cssIdent(id)}`;
            const title = must(el, "[data-testid=tool-name]");
            title.id = `${el.id}-name`;
            el.setAttribute("aria-labelledby", title.id);
            cards.set(id, el);
            append(el);
        }
        if (name) {
            el.dataset.toolName = name;
            must(el, "[data-testid=tool-name]").textContent = name;
        }
        return el;
    }

    /** @param {ToolCard} c */
    function renderCard(c) {
        const el = cardFor(c.id, c.name);
        el.dataset.status = c.status;
        el.dataset.local = String(c.local);
        if (c.where) el.dataset.where = c.where;
        else delete el.dataset.where;
        if (c.handler) el.dataset.handler = c.handler;
        must(el, "[data-testid=tool-handler]").textContent = c.handler ?? "";
        must(el, "[data-testid=tool-handler]").hidden = !c.handler;
        must(el, "[data-testid=tool-status]").textContent = statusText(c);
        const attempt = must(el, "[data-testid=tool-attempt]");
        // One attempt of one says nothing; "attempt 2 of 3" does.
        attempt.textContent = c.attempts > 1 ? `attempt ${c.attempt} of ${c.attempts}` : "";
        attempt.hidden = !(c.attempts > 1);
        must(el, "[data-testid=tool-args]").textContent = pretty(c.arguments);
        if (c.input && c.input.status !== "valid") {
            const bad = must(el, "[data-testid=tool-input]");
            bad.hidden = false;
            bad.dataset.inputStatus = c.input.status;
            bad.textContent = `Arguments are ${c.input.status}: ${c.input.error ?? ""}`;
        }

        const failures = must(el, "[data-testid=tool-attempts]");
        failures.replaceChildren(...c.failures.map((f) => {
            const li = doc.createElement("li");
            li.dataset.testid = "tool-failure";
            li.dataset.code = f.code ?? "";
            li.textContent = `Attempt ${f.attempt} of ${c.attempts} failed${f.code ? ` (${f.code})` : ""}: ${f.error}` +
                (f.backoff ? ` Next try after ${duration(f.backoff)}.` : "");
            return li;
        }));
        failures.hidden = c.failures.length === 0;

        const result = must(el, "[data-testid=tool-result]");
        const error = must(el, "[data-testid=tool-error]");
        result.hidden = c.status !== "done";
        error.hidden = c.status !== "error";
        if (c.status === "done") must(result, "pre").textContent = pretty(c.result ?? "");
        if (c.status === "error") must(error, "pre").textContent = c.error ?? "";

        const sent = must(el, "[data-testid=tool-transcript]");
        sent.hidden = !c.transcript;
        if (c.transcript) {
            sent.dataset.isError = String(c.transcript.isError);
            must(sent, "pre").textContent = pretty(c.transcript.content);
        }
        // A client call runs in one tab: the others say where it is instead
        // of showing its UI. A settled card keeps the slot as it was.
        const where = must(el, "[data-testid=tool-where]");
        const away = c.where === "elsewhere" || c.where === "waiting" ? c.where : null;
        where.hidden = !away;
        where.textContent = away ? WHERE_TEXT[away] : "";
        const slot = must(el, "[data-testid=tool-slot]");
        if (c.where) slot.hidden = c.where !== "here";
        if (c.status === "done" || c.status === "error") {
            // Whatever a tool put in its slot (Approve/Deny) is over.
            slot.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        }
        followBottom();
    }

    const offs = [
        client.on("reset", () => {
            log.replaceChildren();
            cards.clear();
            streaming = unclaimed = null;
            setBusy(false);
        }),
        client.on("state", ({ state, retryIn }) => {
            status.dataset.state = state;
            root.dataset.connection = state;
            status.textContent = state === "closed" && retryIn !== undefined
                ? `Offline, retrying in ${Math.ceil(retryIn / 1000)}s`
                : STATE_TEXT[state] ?? state;
        }),
        client.on("message", ({ message }) => {
            if (message.role === "user") {
                const el = messageItem("user");
                must(el, "[data-testid=message-text]").textContent = message.content ?? "";
                setBusy(true);
            } else if (message.role === "assistant") {
                const el = streaming ?? unclaimed;
                streaming = unclaimed = null;
                if (!message.content && !el) return; // tool uses only: their cards follow
                const target = el ?? messageItem("assistant");
                must(target, "[data-testid=message-text]").textContent = message.content ?? "";
                finishStreaming(target);
            }
        }),
        client.on("delta", ({ text }) => {
            const el = assistantTurn();
            must(el, "[data-testid=message-text]").append(text);
            setBusy(true);
            followBottom();
        }),
        client.on("discarded", () => {
            // A restart cut the turn: its partial text goes; the turn streams anew.
            streaming?.remove();
            streaming = null;
        }),
        client.on("model.finished", ({ error, stopReason }) => {
            if (streaming) {
                finishStreaming(streaming);
                unclaimed = streaming;
                streaming = null;
            }
            if (error) notice("error", `The model failed: ${error}`);
            else if (stopReason === "cancelled") notice("info", "Stopped.");
        }),
        client.on("tool", (card) => {
            renderCard(card);
            if (card.status === "running") setBusy(true);
        }),
        client.on("idle", () => setBusy(false)),
        // A limit stopped the model: say why, in the gateway's words.
        client.on("guard", ({ message, guard }) => notice("guard", message || `Stopped by the ${guard} limit.`)),
        client.on("client.event", ({ name, data }) => {
            notice("event", data === undefined ? name : `${name}: ${JSON.stringify(data)}`);
        }),
        client.on("error", ({ code, message, seq, refused }) => {
            // Session errors are part of the conversation; refused frames are not.
            if (seq !== undefined) notice("error", message || code);
            else if (refused?.type === "message") {
                // Over the gateway's limits, never sent. The box still holds
                // it when send() refused it; one queued offline is given back.
                notice("error", `Your message was not sent: ${message}`);
                if (!prompt.value) {
                    prompt.value = refused.content;
                    setBusy(false);
                }
            } else if (code === FRAME_ERROR.STORE_UNAVAILABLE) {
                // The message was not taken: say so, and give its text back.
                notice("error", `Your message was not sent: ${message}`);
                if (!prompt.value && lastSent) prompt.value = lastSent;
                setBusy(false);
            } else console.warn(`gateway refused a frame: ${code}: ${message}`);
        }),
        client.on("ended", ({ reason }) => {
            notice("info", reason ? `The conversation ended: ${reason}` : "The conversation ended.");
            setBusy(false);
            prompt.disabled = true;
        }),
    ];

    form.addEventListener("submit", (e) => {
        e.preventDefault();
        const text = prompt.value.trim();
        if (!text) return;
        try {
            client.send(text);
        } catch (err) {
            // Over the gateway's limits: the error event said so; keep the text.
            if (/** @type {any} */ (err)?.code === FRAME_ERROR.LIMIT_EXCEEDED) return;
            throw err;
        }
        lastSent = text;
        prompt.value = "";
        stick = true;
        followBottom();
        setBusy(true);
    });
    prompt.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            form.requestSubmit();
        }
    });
    stop.addEventListener("click", () => client.cancel());
    newChat?.addEventListener("click", () => {
        prompt.disabled = false;
        client.reset();
        prompt.focus();
    });

    return {
        /**
         * The element inside a call's card where a tool may render UI of its
         * own (a question, buttons). Creates the card if it is not shown yet.
         * @param {string} id
         * @param {string} [name]
         * @returns {HTMLElement}
         */
        toolSlot(id, name) {
            return must(cardFor(id, name), "[data-testid=tool-slot]");
        },
        /**
         * A copy of the page's <template id=...> content's first element.
         * @param {string} id
         */
        clone(id) {
            return clone(doc, id);
        },
        /** Whether a turn or a call is running. */
        get busy() {
            return busy;
        },
        /** Stops rendering. */
        unmount() {
            offs.forEach((off) => off());
        },
    };
}

/** @param {ToolCard} c */
function statusText(c) {
    switch (c.status) {
        case "pending": return "Pending";
        case "running": return "Running";
        case "retrying": return c.backoff ? `Retrying in ${duration(c.backoff)}` : "Retrying";
        case "done": return "Done";
        case "error": return "Error";
    }
    return c.status;
}

/**
 * A value for reading: JSON on one line when short, indented when long; a
 * JSON string unquoted; text that is not JSON as it is.
 * @param {unknown} v  A value, or a string that may hold JSON.
 */
export function pretty(v) {
    let value = v;
    if (typeof v === "string") {
        try {
            value = JSON.parse(v);
        } catch {
            return v;
        }
    }
    if (typeof value === "string") return value;
    const oneLine = JSON.stringify(value, null, 1)?.replace(/\n\s*/g, " ") ?? "";
    return oneLine.length <= 80 ? oneLine : JSON.stringify(value, null, 2);
}

const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };

/**
 * A Go duration ("13.170913ms", "1m30s") for reading: "13 ms", "1.5 s", "90 s".
 * Text that is not a duration is returned as it is.
 * @param {string} text
 */
export function duration(text) {
    const parts = [...String(text).matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)];
    if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) return text;
    const ms = parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[/** @type {keyof UNIT_MS} */ (unit)], 0);
    if (ms < 1000) return `${Math.round(ms)} ms`;
    return `${Number((ms / 1000).toFixed(1))} s`;
}

/** @param {ParentNode} root @param {string} selector @returns {HTMLElement} */
function must(root, selector) {
    const el = root.querySelector(selector);
    if (!el) throw new Error(`chat: the page has no ${selector}`);
    return /** @type {HTMLElement} */ (el);
}

/** @param {Document} doc @param {string} id @returns {HTMLElement} */
function clone(doc, id) {
    const tpl = doc.getElementById(id);
    if (!(tpl instanceof HTMLTemplateElement)) throw new Error(`chat: the page has no <template id="${id}">`);
    const el = tpl.content.firstElementChild?.cloneNode(true);
    if (!(el instanceof HTMLElement)) throw new Error(`chat: <template id="${id}"> is empty`);
    return el;
}

/** @param {string} s */
function cssIdent(s) {
    return s.replace(/[^A-Za-z0-9_-]/g, "_");
}
