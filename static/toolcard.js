/**
 * toolcard.js draws one tool call of the chat page from the SDK's ToolCard
 * (cards.js): a one-line summary (name, handler, status, attempt, a friendly
 * time) that unfolds (<details>) to the arguments, the failed attempts, the
 * result or error and what the model received. The tool's own UI (confirm's
 * question) and "Running in another tab" stay outside the fold, always
 * visible. The markup is web/chat.templ's tpl-tool-card.
 *
 * Times are for reading: "0.4 s" for how long a call took (measured by this
 * page, so unknown for calls replayed after a reload), "times out in 25 s"
 * while an attempt runs, "Retrying in 200 ms"; never an ISO stamp.
 *
 * A call delegated to a sub-agent (card.subagent) shows, outside the fold,
 * which model answers it and the sub-agent's text as it streams; the chat
 * page puts the sub-agent's own cards in its list (subagentCalls).
 *
 * Exports: renderToolCard(el, card, now), tickText(el, card, now), tickAll(els, states, live, now),
 * subagentCalls(el), statusText(card), pretty(value), duration(goDuration),
 * friendlyMs(ms).
 *
 * @module toolcard
 */

import { must } from "./dom.js";
import { jsonValue } from "./events.js";

/** @typedef {import("./cards.js").ToolCard} ToolCard */

/** What a running client call's card says when this tab does not run it. */
const WHERE_TEXT = { elsewhere: "Running in another tab", waiting: "Waiting for the page" };

/**
 * When this page saw each card start and settle (ms since the epoch), by
 * element: the SDK's cards carry no clock, and replayed events are old news.
 * @type {WeakMap<HTMLElement, {seen?: number, settled?: number, replayedFirst?: boolean}>}
 */
const times = new WeakMap();
/** Each card element's current approve(), while its call asks for approval. */
const approvers = new WeakMap();
/** Approval gates made so far: each question's element id is its own. */
let gates = 0;
/** @type {WeakMap<HTMLElement, Map<string, HTMLElement>>} each card's parts by test id, once found: the template's, which stay */
const parts = new WeakMap();

/**
 * Brings el up to date with card; whether its time counts down (tickAll).
 * @param {HTMLElement} el  A clone of tpl-tool-card.
 * @param {ToolCard} c
 * @param {number} now  The gateway's time now (Date.now() + client.clockSkew): deadlines are on its clock.
 */
export function renderToolCard(el, c, now) {
    const t = times.get(el) ?? {};
    times.set(el, t);
    const settled = c.status === "done" || c.status === "error";
    // Timed only from a start this page saw: a call it first knew from a
    // replay (a reload) began before it, however it goes on here.
    t.replayedFirst ??= c.replayed;
    if (!t.replayedFirst && t.seen === undefined && !settled) t.seen = now;
    if (settled && t.seen !== undefined && t.settled === undefined) t.settled = now;

    el.dataset.status = c.status;
    el.dataset.local = String(c.local);
    if (c.where) el.dataset.where = c.where;
    else delete el.dataset.where;
    if (c.handler) el.dataset.handler = c.handler;
    const handler = part(el, "tool-handler");
    handler.textContent = c.handler ?? "";
    handler.hidden = !c.handler;
    part(el, "tool-status").textContent = statusText(c);
    const attempt = part(el, "tool-attempt");
    // One attempt of one says nothing; "attempt 2 of 3" does.
    attempt.textContent = c.attempts > 1 ? `attempt ${c.attempt} of ${c.attempts}` : "";
    attempt.hidden = !(c.attempts > 1);
    progressText(el, attempt, c);
    approvalPart(el, c);
    subagentPart(el, c);

    part(el, "tool-args").textContent = pretty(c.arguments) || "{}";
    if (c.input && c.input.status !== "valid") {
        const bad = part(el, "tool-input");
        bad.hidden = false;
        bad.dataset.inputStatus = c.input.status;
        bad.textContent = `Arguments are ${c.input.status}: ${c.input.error ?? ""}`;
    }

    const failures = part(el, "tool-attempts");
    failures.replaceChildren(...c.failures.map((f) => {
        const li = el.ownerDocument.createElement("li");
        li.dataset.testid = "tool-failure";
        li.dataset.code = f.code ?? "";
        li.textContent = `Attempt ${f.attempt} of ${c.attempts} failed${f.code ? ` (${f.code})` : ""}: ${f.error}` +
            (f.backoff ? ` Next try after ${duration(f.backoff)}.` : "");
        return li;
    }));
    failures.hidden = c.failures.length === 0;

    const result = part(el, "tool-result"), error = part(el, "tool-error");
    result.hidden = c.status !== "done";
    error.hidden = c.status !== "error";
    if (c.status === "done") must(result, "pre").textContent = pretty(c.result ?? "");
    if (c.status === "error") must(error, "pre").textContent = c.error ?? "";

    const sent = part(el, "tool-transcript");
    sent.hidden = !c.transcript;
    if (c.transcript) {
        sent.dataset.isError = String(c.transcript.isError);
        must(sent, "pre").textContent = pretty(c.transcript.content);
    }
    // A client call runs in one tab: the others say where it is instead of
    // showing its UI. A settled card keeps the slot as it was.
    const where = part(el, "tool-where"), away = c.where === "elsewhere" || c.where === "waiting" ? c.where : null;
    where.hidden = !away;
    where.textContent = away ? WHERE_TEXT[away] : "";
    const slot = part(el, "tool-slot");
    if (c.where) slot.hidden = c.where !== "here";
    if (settled) {
        // Whatever a tool put in its slot (Approve/Deny) is over.
        slot.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    }
    return tickText(el, c, now);
}

/**
 * Ticks the countdowns of the cards live holds, by id (not a long chat's many settled ones:
 * states has each one's last state, els its element), and drops those that stopped; whether any still counts down.
 * @param {Map<string, HTMLElement>} els @param {Map<string, ToolCard>} states @param {Set<string>} live @param {number} now
 */
export function tickAll(els, states, live, now) {
    for (const id of live) {
        const el = els.get(id), c = states.get(id);
        if (!el || !c || !tickText(el, c, now)) live.delete(id);
    }
    return live.size > 0;
}

/**
 * Updates the card's time (a countdown ticks every second while it runs).
 * Returns whether the text will change as time passes.
 * @param {HTMLElement} el
 * @param {ToolCard} c
 * @param {number} now
 */
export function tickText(el, c, now) {
    const t = times.get(el) ?? {};
    const time = part(el, "tool-time");
    let text = "", ticking = false;
    if ((c.status === "done" || c.status === "error") && t.seen !== undefined && t.settled !== undefined) {
        text = friendlyMs(t.settled - t.seen);
    } else if (c.status === "running" && c.deadline) {
        const left = Date.parse(c.deadline) - now;
        if (left > 0) text = `times out in ${friendlyMs(Math.ceil(left / 1000) * 1000)}`;
        ticking = left > 0;
    }
    time.textContent = text;
    time.hidden = !text;
    // A countdown read every second is noise: it is for the eyes.
    if (ticking) time.setAttribute("aria-hidden", "true");
    else time.removeAttribute("aria-hidden");
    return ticking;
}

/** @param {ToolCard} c */
export function statusText(c) {
    switch (c.status) {
        case "pending": return c.approval ? "Needs approval" : "Pending";
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
    const value = typeof v === "string" ? jsonValue(v) : v;
    if (typeof value === "string") return value;
    const oneLine = JSON.stringify(value, null, 1)?.replace(/\n\s*/g, " ") ?? "";
    return oneLine.length <= 80 ? oneLine : JSON.stringify(value, null, 2);
}

const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };

/**
 * A Go duration ("13.170913ms", "1m30s") for reading: "13 ms", "1.5 s", "1 min 30 s".
 * Text that is not a duration is returned as it is.
 * @param {string} text
 */
export function duration(text) {
    const parts = [...String(text).matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)];
    if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) return text;
    return friendlyMs(parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[/** @type {keyof UNIT_MS} */ (unit)], 0));
}

/**
 * Milliseconds for reading: "340 ms", "2.1 s", "25 s", "1 min 5 s".
 * @param {number} ms
 */
export function friendlyMs(ms) {
    if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
    if (ms < 10_000) return `${Number((ms / 1000).toFixed(1))} s`;
    if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
    const s = Math.round(ms / 1000);
    return s % 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s / 60} min`;
}

/**
 * Asks the user, in the card, to approve or deny a call whose tool asks for
 * approval (tool.approval): the first answer from any tab wins.
 * @param {HTMLElement} el @param {ToolCard} c
 */
function approvalPart(el, c) {
    approvers.set(el, c.approve);
    let box = own(el, "[data-testid=tool-approval]");
    if (!c.approval) {
        if (box && !box.hidden) {
            keepFocus(el, box);
            box.hidden = true;
        }
        return;
    }
    if (!box) {
        // As the confirm tool's question (tpl-confirm): outside the fold,
        // a group named by its question, the page's buttons.
        const doc = el.ownerDocument;
        box = doc.createElement("div");
        box.dataset.testid = "tool-approval";
        box.className = "confirm approval";
        box.setAttribute("role", "group");
        const ask = doc.createElement("p");
        ask.className = "confirm-question";
        ask.id = `approval-${++gates}`;
        ask.textContent = `Allow ${c.name} to run with these arguments?`;
        box.setAttribute("aria-labelledby", ask.id);
        const args = doc.createElement("pre");
        args.className = "tool-args";
        args.textContent = pretty(c.arguments) || "{}";
        const actions = doc.createElement("div");
        actions.className = "confirm-actions";
        for (const [testid, label, yes] of [["approve", "Approve", true], ["deny", "Deny", false]]) {
            const b = doc.createElement("button");
            b.type = "button";
            b.className = yes ? "btn primary" : "btn danger";
            b.dataset.testid = testid;
            b.textContent = /** @type {string} */ (label);
            b.addEventListener("click", () => {
                const approve = approvers.get(el);
                if (!approve || !box) return;
                // Not sent now: kept while the page is offline (chat.js's
                // data-connection), sent once it is back, and another click
                // before then replaces it, so the buttons stay; online, an
                // answer written before stands (a double-click, or one kept
                // offline that went as the page came back).
                const connection = el.closest("[data-connection]")?.getAttribute("data-connection");
                if (!approve(Boolean(yes)) && connection && connection !== "open") {
                    heldAnswer(box, `${yes ? "Approved" : "Denied"}: it is sent once the page is back online.`);
                    return;
                }
                box.querySelector("[data-testid=approval-held]")?.remove();
                keepFocus(el, box);
                box.querySelectorAll("button").forEach((x) => { x.disabled = true; });
            });
            actions.append(b);
        }
        box.append(ask, args, actions);
        part(el, "tool-where").before(box);
    }
    box.hidden = false;
}

/**
 * Says in box, and to screen readers, what becomes of an answer given
 * while the page is offline. @param {HTMLElement} box @param {string} text
 */
function heldAnswer(box, text) {
    let p = /** @type {HTMLElement | null} */ (box.querySelector("[data-testid=approval-held]"));
    if (!p) {
        p = box.ownerDocument.createElement("p");
        p.dataset.testid = "approval-held";
        p.className = "confirm-answer";
        box.append(p);
    }
    p.textContent = text;
    box.dispatchEvent(new CustomEvent("announce", { bubbles: true, detail: text }));
}

/**
 * Moves the focus from box, whose buttons are going (disabled or hidden:
 * the focus would fall to <body>), to the card's line.
 * @param {HTMLElement} el @param {HTMLElement} box
 */
function keepFocus(el, box) {
    if (box.contains(el.ownerDocument.activeElement)) own(el, "summary")?.focus();
}

/**
 * Shows the running attempt's last progress report after the attempt:
 * "uploading · 3 of 10".
 * @param {HTMLElement} el @param {HTMLElement} after @param {ToolCard} c
 */
function progressText(el, after, c) {
    let span = own(el, "[data-testid=tool-progress]");
    const p = c.status === "running" ? c.progress : null;
    if (!p && !span) return;
    if (!span) {
        span = el.ownerDocument.createElement("span");
        span.dataset.testid = "tool-progress";
        span.className = "attempt";
        after.after(span);
    }
    const figures = p?.progress === undefined ? "" : p.total ? `${p.progress} of ${p.total}` : String(p.progress);
    span.textContent = p ? [p.message, figures].filter(Boolean).join(" · ") : "";
    span.hidden = !span.textContent;
}

/**
 * The sub-agent answering the call: its model and depth, its text, its
 * problems; its calls' cards go in subagentCalls(el).
 * @param {HTMLElement} el @param {ToolCard} c
 */
function subagentPart(el, c) {
    const box = el.querySelector(":scope > [data-testid=tool-subagent]");
    if (!c.subagent) {
        if (box instanceof HTMLElement) box.hidden = !box.querySelector("[data-testid=tool-card]");
        return;
    }
    const sub = subagentBox(el);
    sub.hidden = false;
    const head = must(sub, "[data-testid=subagent-head]");
    head.textContent = `Sub-agent on ${c.subagent.model}` + (c.subagent.depth > 1 ? ` (depth ${c.subagent.depth})` : "") +
        (c.subagent.attempt > 1 ? `, attempt ${c.subagent.attempt}` : "");
    const text = must(sub, "[data-testid=subagent-text]");
    text.textContent = c.subagent.text;
    text.hidden = !c.subagent.text;
    const problem = must(sub, "[data-testid=subagent-error]");
    problem.textContent = c.subagent.error ?? "";
    problem.hidden = !c.subagent.error;
}

/**
 * The list a card's sub-agent's calls go in (created on first use).
 * @param {HTMLElement} el  A tool card.
 * @returns {HTMLElement}
 */
export function subagentCalls(el) {
    return must(subagentBox(el), "[data-testid=subagent-calls]");
}

/** @param {HTMLElement} el @returns {HTMLElement} */
function subagentBox(el) {
    let box = /** @type {HTMLElement | null} */ (el.querySelector(":scope > [data-testid=tool-subagent]"));
    if (box) return box;
    const doc = el.ownerDocument;
    box = doc.createElement("div");
    box.dataset.testid = "tool-subagent";
    box.className = "subagent";
    const head = doc.createElement("p");
    head.dataset.testid = "subagent-head";
    head.className = "subagent-head";
    const text = doc.createElement("p");
    text.dataset.testid = "subagent-text";
    text.className = "subagent-text";
    const problem = doc.createElement("p");
    problem.dataset.testid = "subagent-error";
    problem.className = "subagent-error";
    problem.hidden = true;
    const calls = doc.createElement("ol");
    calls.dataset.testid = "subagent-calls";
    calls.className = "subagent-calls";
    calls.setAttribute("aria-label", "The sub-agent's tool calls");
    box.append(head, text, problem, calls);
    part(el, "tool-where").before(box);
    return box;
}

/** @param {HTMLElement} el @param {string} testid */
function part(el, testid) {
    const known = parts.get(el) ?? new Map();
    const found = known.get(testid) ?? own(el, `[data-testid=${testid}]`);
    if (!found) throw new Error(`chat: the tool card has no [data-testid=${testid}]`);
    parts.set(el, known.set(testid, found));
    return found;
}

/**
 * The first element under card el that matches selector and is el's own,
 * not a part of a sub-agent's card nested in it.
 * @param {HTMLElement} el @param {string} selector @returns {HTMLElement | null}
 */
function own(el, selector) {
    for (const found of el.querySelectorAll(selector)) {
        if (found.closest("[data-testid=tool-card]") === el) return /** @type {HTMLElement} */ (found);
    }
    return null;
}
