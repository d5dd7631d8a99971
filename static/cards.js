/**
 * cards.js: the tool-card view model. One card per tool call, rebuilt from
 * the session's events (the assistant message's tool uses, `tool.started`,
 * `tool.leased`, `tool.retrying`, `tool.finished`, the transcript's tool
 * message) and this page's own run of the call (runner.js reports it through
 * `delivered` and `localState`). The client emits each changed card as its
 * `tool` event.
 *
 * Sub-agents (docs/subagents.md): a call the worker delegated gets
 * `subagent` (tool.delegated: its model, and its text as it streams, from
 * the events that carry `parent`: that call's id); the sub-agent's own calls
 * are cards too, with `parent` set, so a UI draws them inside that card.
 *
 * Exports:
 * - ToolCards: the cards of one session; `apply(event, replayed)` takes a
 *   session event, `page` is this connection's page id (setting it
 *   recomputes every card's `where`), `list()` copies every card, `resend()`
 *   writes again the user's approvals not taken (a card's `approve`).
 * - whereOf(card, page): where a card's current attempt runs, from this page.
 * - isSettled(status).
 *
 * @module cards
 */

/**
 * @typedef {import("./runner.js").ToolInput} ToolInput
 * @typedef {import("./runner.js").ToolCallFrame} ToolCallFrame
 * @typedef {"running" | "answered" | "cancelled"} LocalState
 *
 * @typedef {"pending" | "running" | "retrying" | "done" | "error"} ToolStatus
 *
 * @typedef {"here" | "elsewhere" | "waiting"} ToolWhere
 *     Where a running client attempt runs, seen from this page: in this page,
 *     in another page of the session, or nowhere yet (it waits for a page
 *     that declares the tool).
 *
 * @typedef {object} ToolAttempt  A failed attempt, as tool.retrying reported it.
 * @property {number} attempt
 * @property {string} error
 * @property {string} [code]
 * @property {string} [backoff]   The wait before the next attempt.
 *
 * @typedef {object} ToolCard  Everything known about one tool call.
 * @property {string} id
 * @property {string} name
 * @property {string} arguments   Raw argument string.
 * @property {ToolInput | null} input
 * @property {"worker" | "client" | null} handler
 * @property {ToolStatus} status
 *     pending: the model asked for it; running: an attempt is running;
 *     retrying: an attempt failed and `attempt` (the next) starts after `backoff`;
 *     done / error: settled (tool.finished).
 * @property {number} attempt     The current (or next, when retrying) attempt.
 * @property {number} attempts
 * @property {string | null} deadline
 * @property {string | null} backoff
 * @property {ToolAttempt[]} failures  Failed attempts, oldest first.
 * @property {string | null} page  The page id that runs the current client
 *     attempt (tool.started, tool.leased); null: none (yet), or a worker call.
 * @property {ToolWhere | null} where  `page` seen from this page, while a
 *     client attempt runs; null for worker calls, pending, retrying and
 *     settled cards, and while the gateway has not given this page an id.
 * @property {{digest: string, deadline: string | null} | null} approval
 *     Set while the call waits for the user's approval (tool.approval).
 * @property {((approved: boolean) => boolean) | undefined} approve  While approval is set: answers it (tool.approve);
 *     false when not sent now. Sent again after each session.opened's replay (resend) until taken or settled.
 * @property {boolean} [approved]  How the approval was answered (tool.approved).
 * @property {{progress?: number, total?: number, message?: string} | null} progress
 *     The current attempt's last tool.progress; null: none yet.
 * @property {string} [result]    Set when done: the result as text, what the model read.
 * @property {*} [value]          Set when done: the result as a value, result parsed as
 *     JSON when it is JSON, else the text itself.
 * @property {string} [error]     Set on error.
 * @property {string} [code]      Set on error: why it failed (TOOL_ERROR: cancelled, timeout, denied, ...).
 * @property {boolean} local      This page was delivered the call.
 * @property {LocalState | null} localState  What this page's run of the current attempt did.
 * @property {{ content: string, isError: boolean } | null} transcript
 *     The tool message that joined the transcript: exactly what the model received.
 * @property {boolean} replayed
 * @property {string | null} parent  The call whose sub-agent made this call;
 *     null: the session's own agent made it.
 * @property {SubAgent | null} subagent  Set when the worker delegated the
 *     call to a sub-agent (tool.delegated); a retry's sub-agent replaces it.
 *
 * @typedef {object} SubAgent  The sub-agent answering a call's attempt.
 * @property {string} model
 * @property {string[]} tools
 * @property {number} depth    1 under the session's own agent.
 * @property {number} attempt  The call's attempt it answers.
 * @property {string[]} turns  Its text, one string per model turn, as it streams.
 * @property {string} text     turns joined by blank lines.
 * @property {string | null} error  Its last error or guard message.
 */

import { jsonValue, parentOf } from "./events.js";

/** @param {ToolStatus} s */
export function isSettled(s) {
    return s === "done" || s === "error";
}

/**
 * Where card's current attempt runs, from the page with id page.
 * @param {Pick<ToolCard, "handler" | "status" | "page">} card
 * @param {string | null} page  This page's id; null: unknown.
 * @returns {ToolWhere | null}
 */
export function whereOf(card, page) {
    if (card.handler !== "client" || card.status !== "running" || page === null) return null;
    if (card.page === null) return "waiting";
    return card.page === page ? "here" : "elsewhere";
}

/** The tool cards of one session, in the order the calls appeared. */
export class ToolCards {
    /** @type {Map<string, ToolCard>} */ #cards = new Map();
    /** @type {string | null} */ #page = null;
    /** @type {Set<string>} calls whose sub-agent's model turn is streaming */ #streaming = new Set();
    /** @type {(card: ToolCard) => void} */ #emit;
    /** @type {(frame: object) => boolean} */ #write;
    /** @type {Map<string, {frame: object, sentOn: number}>} approvals not taken, by call; sentOn: #opens() when written */ #approving = new Map();
    /** @type {() => number} how many session.opened came */ #opens;

    /**
     * @param {(card: ToolCard) => void} emit  Gets a copy of a card after each change.
     * @param {(frame: object) => boolean} [write]  Sends a frame (a card's approve()). opens: #opens.
     */
    constructor(emit, write = () => false, opens = () => 0) {
        this.#emit = emit;
        this.#write = write;
        this.#opens = opens;
    }

    skew = 0; // ms the gateway's clock is ahead of this page's: the last session.opened's `now` less Date.now() as it came

    /** This connection's page id (session.opened); null until known. */
    get page() {
        return this.#page;
    }

    /** Sets the page id; every card whose `where` changes with it is emitted. */
    set page(page) {
        if (page === this.#page) return;
        const before = new Map([...this.#cards].map(([id, c]) => [id, whereOf(c, this.#page)]));
        this.#page = page;
        for (const [id, card] of this.#cards) {
            if (whereOf(card, page) !== before.get(id)) this.#changed(card, false);
        }
    }

    /** Copies of every card, oldest first. @returns {ToolCard[]} */
    list() {
        return [...this.#cards.values()].map((c) => this.#snapshot(c, false));
    }

    /** Forgets every card (a new session). */
    clear() {
        this.#cards.clear();
        this.#streaming.clear();
        this.#approving.clear();
    }

    /** Sends again the approvals not taken and not sent since this session.opened: its replay is in. */
    resend() { for (const [id, a] of this.#approving) if (a.sentOn !== this.#opens()) this.#send(id, a.frame); }

    /** Keeps call id's approval frame until taken, and writes it; false when not written now. */
    #send(/** @type {string} */ id, /** @type {object} */ frame) {
        const written = this.#write(frame);
        this.#approving.set(id, { frame, sentOn: written ? this.#opens() : 0 });
        return written;
    }

    /** Takes a session event; the ones about tool calls change their card. @param {any} f @param {boolean} replayed */
    apply(f, replayed) {
        const parent = parentOf(f);
        if (parent && this.#subagentEvent(parent, f, replayed)) return;
        switch (f.type) {
            case "message": {
                const message = f.message ?? {};
                if (message.role === "assistant" && Array.isArray(message.toolUses)) {
                    for (const use of message.toolUses) {
                        const card = this.#card(use.id, use.name, parent);
                        if (!card.arguments) card.arguments = use.arguments ?? "";
                        this.#changed(card, replayed);
                    }
                } else if (message.role === "tool" && message.toolUseId) {
                    const card = this.#card(message.toolUseId, message.name, parent);
                    card.transcript = { content: message.content ?? "", isError: !!message.isError };
                    this.#changed(card, replayed);
                }
                break;
            }
            case "tool.started": {
                const card = this.#card(f.id, f.name, parent);
                Object.assign(card, {
                    status: isSettled(card.status) ? card.status : "running",
                    arguments: f.arguments ?? card.arguments,
                    input: f.input ?? card.input,
                    handler: f.handler ?? card.handler,
                    attempt: f.attempt ?? card.attempt,
                    attempts: f.attempts ?? card.attempts,
                    deadline: f.deadline ?? null,
                    backoff: null,
                    progress: null,
                    page: typeof f.page === "string" && f.page ? f.page : null,
                });
                this.#changed(card, replayed);
                break;
            }
            case "tool.leased": {
                // Another page took the current attempt, or it waits for one.
                const card = this.#cards.get(f.id);
                if (!card || isSettled(card.status) || f.attempt !== card.attempt) break;
                card.page = typeof f.page === "string" && f.page ? f.page : null;
                this.#changed(card, replayed);
                break;
            }
            case "tool.approval": {
                // The call waits for the user: card.approve(true | false) answers.
                const card = this.#card(f.id, f.name, parent);
                if (isSettled(card.status)) break;
                const { digest } = f;
                Object.assign(card, { arguments: f.arguments ?? card.arguments, input: f.input ?? card.input, handler: f.handler ?? card.handler, deadline: f.deadline ?? null });
                card.approval = { digest, deadline: f.deadline ?? null };
                // An answer written stands (a double-click's second is not sent); one kept offline, never written, the next replaces.
                card.approve = (approved) => !this.#approving.get(f.id)?.sentOn && this.#send(f.id, { type: "tool.approve", id: f.id, digest, approved: Boolean(approved) });
                this.#changed(card, replayed);
                break;
            }
            case "tool.approved": {
                this.#approving.delete(f.id);
                const card = this.#cards.get(f.id);
                if (!card) break;
                card.approval = null;
                card.approve = undefined;
                card.approved = Boolean(f.approved);
                this.#changed(card, replayed);
                break;
            }
            case "tool.progress": {
                // The current attempt still works: its deadline moved.
                const card = this.#cards.get(f.id);
                if (!card || isSettled(card.status) || f.attempt !== card.attempt) break;
                card.progress = { progress: f.progress, total: f.total, message: f.message };
                card.deadline = f.deadline ?? card.deadline;
                this.#changed(card, replayed);
                break;
            }
            case "tool.retrying": {
                const card = this.#card(f.id, f.name, parent);
                card.failures.push({ attempt: f.attempt, error: f.error ?? "", code: f.code, backoff: f.backoff });
                if (!isSettled(card.status)) card.status = "retrying";
                card.attempt = (f.attempt ?? 0) + 1;
                card.attempts = f.attempts ?? card.attempts;
                card.backoff = f.backoff ?? null;
                card.deadline = null;
                card.progress = null;
                card.page = null;
                this.#changed(card, replayed);
                break;
            }
            case "tool.delegated": {
                // A sub-agent answers this attempt: its events follow, with parent: f.id.
                const card = this.#card(f.id, f.name, parent);
                this.#streaming.delete(f.id);
                card.subagent = {
                    model: String(f.model ?? ""), tools: Array.isArray(f.tools) ? f.tools : [], depth: f.depth ?? 1,
                    attempt: f.attempt ?? card.attempt, turns: [], text: "", error: null,
                };
                this.#changed(card, replayed);
                break;
            }
            case "tool.finished": {
                this.#approving.delete(f.id);
                const card = this.#card(f.id, f.name, parent);
                card.status = f.ok ? "done" : "error";
                card.result = f.result;
                card.value = f.ok ? jsonValue(f.result) : undefined;
                card.error = f.error;
                card.code = f.ok ? undefined : f.code;
                // Settled (a Stop, a timeout) while it asked: it asks no more.
                card.approval = null;
                card.approve = undefined;
                card.backoff = null;
                card.progress = null; // the attempt ended
                this.#changed(card, replayed);
                break;
            }
        }
    }

    /** The deadline the gateway last gave attempt of call id (a progress report moves it), or null. */
    deadlineOf(/** @type {string} */ id, /** @type {number} */ attempt) { const c = this.#cards.get(id); return c?.attempt === attempt ? c.deadline : null; }

    /**
     * This page was delivered an attempt and starts running it.
     * @param {ToolCallFrame} f
     */
    delivered(f) {
        const card = this.#card(f.id, f.name);
        Object.assign(card, {
            local: true,
            localState: "running",
            status: card.status === "pending" || card.status === "retrying" ? "running" : card.status,
            arguments: f.arguments ?? card.arguments,
            input: f.input ?? card.input,
            handler: card.handler ?? "client",
            attempt: f.attempt,
            attempts: f.attempts ?? card.attempts,
            deadline: f.deadline ?? card.deadline,
            // The gateway delivers an attempt only to the page that holds it.
            page: this.#page ?? card.page,
        });
        this.#changed(card, false);
    }

    /**
     * This page's run of an attempt changed; the card shows it if that is still the card's current attempt.
     * @param {string} id @param {number} attempt @param {LocalState} state
     */
    localState(id, attempt, state) {
        const card = this.#cards.get(id);
        if (!card || card.attempt !== attempt) return;
        card.localState = state;
        this.#changed(card, false);
    }

    /**
     * A sub-agent's event that is not about a call of its own: its text and
     * problems, on the card of the call it answers. Returns whether it was one.
     * @param {string} parent @param {any} f @param {boolean} replayed
     */
    #subagentEvent(parent, f, replayed) {
        const card = this.#cards.get(parent);
        const sub = card?.subagent;
        switch (f.type) {
            case "model.delta":
                if (!sub) return true;
                if (!this.#streaming.has(parent)) sub.turns.push("");
                this.#streaming.add(parent);
                sub.turns[sub.turns.length - 1] += String(f.text ?? "");
                sub.text = sub.turns.filter(Boolean).join("\n\n");
                break;
            case "model.finished":
                this.#streaming.delete(parent);
                return true;
            case "error":
            case "guard.tripped":
                if (!sub) return true;
                sub.error = String(f.message ?? "");
                break;
            default:
                return false;
        }
        this.#changed(/** @type {ToolCard} */ (card), replayed);
        return true;
    }

    /** @param {string} id @param {string} [name] @param {string | null} [parent] @returns {ToolCard} */
    #card(id, name, parent = null) {
        let card = this.#cards.get(id);
        if (!card) {
            card = {
                id, name: name ?? "", arguments: "", input: null, handler: null,
                status: "pending", attempt: 0, attempts: 0, deadline: null, backoff: null,
                failures: [], page: null, where: null, progress: null, approval: null, result: undefined, error: undefined,
                local: false, localState: null, transcript: null, replayed: false, parent, subagent: null,
            };
            this.#cards.set(id, card);
        } else if (name && !card.name) {
            card.name = name;
        }
        return card;
    }

    /** @param {ToolCard} card @param {boolean} replayed */
    #changed(card, replayed) {
        this.#emit(this.#snapshot(card, replayed));
    }

    /** @param {ToolCard} card @param {boolean} replayed @returns {ToolCard} */
    #snapshot(card, replayed) {
        return {
            ...card,
            input: card.input ? { ...card.input } : null,
            failures: card.failures.map((f) => ({ ...f })),
            transcript: card.transcript ? { ...card.transcript } : null,
            subagent: card.subagent ? subagentCopy(card.subagent) : null,
            where: whereOf(card, this.#page),
            replayed,
        };
    }
}

/** A sub-agent's part of a card, as a card shows it. @param {SubAgent} s @returns {SubAgent} */
function subagentCopy(s) {
    const { model, tools, depth, attempt, turns, text, error } = s;
    return { model, tools: tools.slice(), depth, attempt, turns: turns.slice(), text, error };
}
