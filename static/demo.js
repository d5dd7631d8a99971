/**
 * demo.js is the demo page's script: the browser tools of the embedded demo
 * agent, wired to the chat UI with the SDK. Each tool's name matches a tool
 * the gateway's default agent declares with handler "client".
 *
 * - get_local_time {}: the page's local time and time zone.
 * - set_theme {theme}: switches the page between "light" and "dark".
 * - confirm {question}: asks the user in the tool's card (human in the loop).
 * - never_answers {}: never settles, but honours the abort signal (tests timeouts).
 * - bad_output {}: returns a string, which breaks its output schema (tests schemas).
 * - slow_upload {parts}: takes longer than its timeout, reporting progress
 *   after each part, which keeps its attempt alive (tests tool.progress).
 *
 * The page around the chat: the list of this browser's chats (history.js)
 * and, while a chat is empty, the suggestions below (welcome.js), each a
 * phrase the demo's scripted model answers with one of these tools.
 *
 * For debugging and end-to-end tests the client is window.gatewayClient, and
 * the list of chats window.chatHistory (its refresh() asks for it now).
 */
import { connect } from "./gateway.js";
import { isSettled } from "./cards.js";
import { mountChat } from "./chat.js";
import { mountHistory } from "./history.js";
import { mountWelcome } from "./welcome.js";
import { must } from "./dom.js";

const SUGGESTIONS = ["what's the weather in Tokyo", "what time is it", "switch to dark theme", "delete my draft"];

const THEME_KEY = "gateway-demo.theme";
const root = document.documentElement;

/** @param {"light" | "dark"} theme */
function applyTheme(theme) {
    root.dataset.theme = theme;
    try {
        localStorage.setItem(THEME_KEY, theme);
    } catch { /* storage unusable: the theme lasts until reload */ }
}

try {
    const saved = localStorage.getItem(THEME_KEY);
    if (saved === "light" || saved === "dark") root.dataset.theme = saved;
} catch { /* storage unusable */ }

/** The local time as ISO 8601 with this zone's offset, e.g. 2025-06-01T09:30:00.000+02:00. */
function localISOString(d = new Date()) {
    const pad = (/** @type {number} */ n, w = 2) => String(Math.trunc(Math.abs(n))).padStart(w, "0");
    const offset = -d.getTimezoneOffset();
    const sign = offset >= 0 ? "+" : "-";
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
        `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}` +
        `${sign}${pad(offset / 60)}:${pad(offset % 60)}`;
}

/** @type {ReturnType<typeof mountChat>} */
let chat;

/** @type {Record<string, import("./gateway.js").Tool>} */
const tools = {
    get_local_time: {
        run: () => ({ time: localISOString(), timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone }),
    },

    set_theme: {
        run: ({ theme }) => {
            if (theme !== "light" && theme !== "dark") throw new Error(`Unknown theme "${theme}": use "light" or "dark".`);
            applyTheme(theme);
            return { theme };
        },
    },

    confirm: {
        run: ({ question }, { signal, call }) => new Promise((resolve, reject) => {
            const slot = chat.toolSlot(call.id, call.name);
            const box = chat.clone("tpl-confirm");
            const text = /** @type {HTMLElement} */ (box.querySelector("[data-testid=confirm-question]"));
            const approve = /** @type {HTMLButtonElement} */ (box.querySelector("[data-testid=confirm-approve]"));
            const deny = /** @type {HTMLButtonElement} */ (box.querySelector("[data-testid=confirm-deny]"));
            const answer = /** @type {HTMLElement} */ (box.querySelector("[data-testid=confirm-answer]"));
            text.textContent = String(question ?? "Are you sure?");
            slot.replaceChildren(box);
            chat.announce(`The assistant asks: ${text.textContent} Approve or Deny.`);

            /** Shows how it ended: to the focus when it was on the buttons (now disabled), else aloud. @param {string} said */
            const tell = (said) => {
                const focused = box.contains(document.activeElement);
                approve.disabled = deny.disabled = true;
                answer.hidden = false;
                answer.textContent = said;
                if (focused) answer.focus();
                // Not when the chat is gone (New chat, a switch): its calls are aborted then.
                else queueMicrotask(() => box.isConnected && chat.announce(said));
            };
            /** @type {boolean | null} the answer given here, if any */
            let given = null;
            const settle = (/** @type {boolean} */ approved) => {
                given = approved;
                tell(approved ? "You approved." : "You denied.");
                signal.removeEventListener("abort", onAbort);
                resolve({ approved });
            };
            const onAbort = () => {
                tell(signal.reason?.name === "TimeoutError" ? "Timed out." : "Cancelled.");
                reject(signal.reason);
            };
            approve.addEventListener("click", () => settle(true), { once: true });
            deny.addEventListener("click", () => settle(false), { once: true });
            if (signal.aborted) onAbort();
            else signal.addEventListener("abort", onAbort, { once: true });
            // What counts is the call's outcome: another tab of the chat may
            // have answered it, or this answer come too late.
            const off = client.on("tool", (/** @type {import("./gateway.js").ToolCard} */ card) => {
                if (card.id !== call.id || !isSettled(card.status)) return;
                off();
                const approved = card.status === "done" && card.value?.approved === true;
                if (card.status === "done" && given !== approved) {
                    tell(approved ? "Approved in another tab." : "Denied in another tab.");
                } else if (card.status !== "done" && given !== null) {
                    tell("Your answer came too late: the call had ended.");
                }
                answer.hidden = false;
                approve.disabled = deny.disabled = true;
            });
        }),
    },

    never_answers: {
        run: (_input, { signal }) => new Promise((_resolve, reject) => {
            signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        }),
    },

    bad_output: {
        run: () => "not an object",
    },

    slow_upload: {
        run: async ({ parts = 5 } = {}, { signal, progress }) => {
            for (let part = 1; part <= parts; part++) {
                await new Promise((resolve, reject) => {
                    const timer = setTimeout(resolve, 400);
                    signal.addEventListener("abort", () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
                });
                progress({ progress: part, total: parts, message: "uploading" });
            }
            return { uploaded: parts };
        },
    },
};

const main = must(document, "[data-chat]");
const client = connect({ url: main.dataset.socket || "/ws", tools });
chat = mountChat(main, client);
mountWelcome(main, client, { suggestions: SUGGESTIONS, send: (text) => chat.send(text) });
const chatList = mountHistory(must(document, "[data-testid=history]"), client, { url: main.dataset.sessions || "/sessions", announce: (text) => chat.announce(text) });
Object.assign(window, { gatewayClient: client, chatHistory: chatList });
