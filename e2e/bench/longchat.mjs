// How the chat page's cost grows with a chat's length: `node
// e2e/bench/longchat.mjs [--n 200,1000] [--reps 3]` after `make deps build`.
// Not a test: it asserts nothing, and prints what the page spent.
//
// It starts bin/gateway on loopback (--store memory, the token and
// new-session guards lifted: the scripted model counts every word of the
// transcript as a token) with a script of its own (docs/scripts.md). For each
// N it builds a chat of N turns with a raw WebSocket speaking
// docs/protocol.md, in a helper tab of the browser context the chat page then
// uses (same cookie): each reply is about 380 bytes of Markdown (a list, a
// table, a link) streamed 3 words a delta, and every 5th turn asks for
// get_local_time, which the helper answers as the page would. The chat page
// then opens that chat, and for each repetition (--reps, 3) it measures:
// - a reload from the page's sessionStorage copy;
// - a reload that replays from the gateway: the copy replaced at pagehide by
//   {session, seq: 0, events: []}, what store.js writes when it does not fit;
// - one more turn sent in the loaded page (about 0.7 s of streaming).
// A reload is "shown" when the list is visible and its last item is the last
// reply (checked each frame), in ms from the reload's start (the old page's
// pagehide write of its copy is in it); its main thread (CDP
// Performance.getMetrics' TaskDuration, which starts anew with each document)
// is given by then and 2.5 s later, which covers the store's writes after
// the reload. A turn is measured from the send to its session.idle plus
// 2.5 s. Long tasks are those over 50 ms; storage writes are the page's
// setItem of its copy (its head and its chunks), in characters of JSON. It
// prints the medians. CHROMIUM names the browser (default
// /usr/bin/chromium).
import { parseArgs } from "node:util";
import { launch, scriptedGateway } from "./reply.mjs";

const { values: opts } = parseArgs({ options: { n: { type: "string", default: "200,1000" }, reps: { type: "string", default: "3" } } });
const sizes = opts.n.split(",").map(Number);
const reps = Number(opts.reps);
if (!sizes.every((n) => Number.isInteger(n) && n > 0) || !(Number.isInteger(reps) && reps > 0)) {
    throw new Error("usage: node e2e/bench/longchat.mjs [--n 200,1000] [--reps 3]");
}

const reply = "Here is the answer to **turn ${1}**, with `inline code` and a [link](https://example.com/t/${1}).\n\n" +
    "- the first point, about item ${1}\n- the second point, *emphasised*\n- a third point that runs a little longer than the others\n\n" +
    "| key | value |\n| --- | --- |\n| turn | ${1} |\n| state | ok |\n\n" +
    "A closing paragraph of plain words, so the reply is a few hundred bytes long. End of turn ${1}.";
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
const median = (/** @type {number[]} */ xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const gateway = await scriptedGateway({
    rules: [
        { match: "^turn (\\d+) tool$", say: "Turn ${1}: let me ask your page for the time.", tools: [{ name: "get_local_time" }] },
        { match: "^turn (\\d+)$", say: reply },
        { match: "^more (\\d+)$", delay: "30ms", say: reply },
    ],
    afterTool: [{ tool: "get_local_time", ok: "Your page says:\n\n```json\n${result}\n```\n\nThat is the **local time** of the page, with its zone. A few more words here so that this reply, like the others, is a few hundred bytes of Markdown with a code block in it." }],
}, { args: ["--max-session-tokens", "-1", "--max-message-tokens", "-1", "--max-new-sessions", "-1"] });
const { url } = gateway;

// In every document of the measuring page: long tasks, writes of the stored
// copy, and the frame where the list shows the reply that ends with `bench.last`.
const probe = () => {
    const w = /** @type {any} */ (window);
    const b = w.bench = { long: /** @type {number[]} */ ([]), sets: /** @type {{len: number, ms: number}[]} */ ([]), shown: -1 };
    new PerformanceObserver((l) => { for (const e of l.getEntries()) b.long.push(e.duration); }).observe({ type: "longtask" });
    const set = Storage.prototype.setItem;
    Storage.prototype.setItem = function (k, v) {
        const t0 = performance.now();
        try { return set.call(this, k, v); } finally { if (String(k).startsWith("gateway.session")) b.sets.push({ len: String(v).length, ms: performance.now() - t0 }); }
    };
    const last = sessionStorage.getItem("bench.last");
    if (!last) return;
    const check = () => {
        const item = document.querySelector("[data-testid=message-list]")?.lastElementChild;
        if (item?.checkVisibility() && item.getAttribute("data-role") === "assistant" && item.textContent?.includes(last)) b.shown = performance.now();
        else requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
};

/** Makes a chat of n turns from page (at /healthz) on a socket of its own: its session and last seq. Turn n is a plain one. @param {import("@playwright/test").Page} page @param {number} n */
const build = (page, n) => page.evaluate(async (n) => {
    const ws = new WebSocket(`ws://${location.host}/ws`);
    /** @type {any[]} */
    const frames = [];
    let wake = () => {};
    ws.onmessage = (e) => {
        const f = JSON.parse(e.data);
        if (f.type === "tool.call") ws.send(JSON.stringify({ type: "tool.result", id: f.id, attempt: f.attempt, result: { time: "2026-05-01T14:05:00+02:00", timeZone: "Europe/Paris" } }));
        frames.push(f);
        wake();
    };
    await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
    /** The next frame of that type; those before it are dropped. @param {...string} types */
    const next = async (...types) => {
        for (;;) {
            const i = frames.findIndex((f) => types.includes(f.type));
            if (i >= 0) return frames.splice(0, i + 1).at(-1);
            await new Promise((r) => { wake = () => r(undefined); });
        }
    };
    ws.send(JSON.stringify({ type: "session.open", tools: ["get_local_time"] }));
    const { session } = await next("session.opened");
    let seq = 0;
    for (let i = 1; i <= n; i++) {
        ws.send(JSON.stringify({ type: "message", id: `m${i}`, content: i % 5 === 3 && i < n ? `turn ${i} tool` : `turn ${i}` }));
        const end = await next("session.idle", "error", "guard.tripped");
        if (end.type !== "session.idle") throw new Error(`turn ${i}: ${JSON.stringify(end)}`);
        seq = end.seq;
    }
    ws.close();
    return { session, seq };
}, n);

/** CDP Performance.getMetrics, in ms for the durations. @param {import("@playwright/test").CDPSession} cdp */
const metrics = async (cdp) => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.name.endsWith("Duration") ? m.value * 1000 : m.value]));
/** The page's long tasks and copy writes since its document or the last reset. @param {import("@playwright/test").Page} page */
const probed = (page) => page.evaluate(() => {
    const b = /** @type {{long: number[], sets: {len: number, ms: number}[]}} */ (/** @type {any} */ (window).bench);
    return { longest: Math.max(0, ...b.long), writes: b.sets.length, chars: b.sets.reduce((s, x) => s + x.len, 0), setMs: b.sets.reduce((s, x) => s + x.ms, 0) };
});

/**
 * Reloads page from its stored copy, or from the gateway (the copy replaced
 * after the SDK's own pagehide write of it).
 * @param {import("@playwright/test").Page} page @param {import("@playwright/test").CDPSession} cdp @param {"storage" | "gateway"} from
 */
async function reload(page, cdp, from) {
    if (from === "gateway") {
        await page.evaluate(() => {
            const { session } = /** @type {any} */ (window).gatewayClient;
            addEventListener("pagehide", () => sessionStorage.setItem("gateway.session", JSON.stringify({ v: 1, session, seq: 0, events: [], unsent: [] })));
        });
    }
    await page.reload({ waitUntil: "commit" });
    await page.waitForFunction(() => /** @type {any} */ (window).bench?.shown >= 0, null, { timeout: 600_000, polling: 100 });
    const byShown = (await metrics(cdp)).TaskDuration;
    await sleep(2500);
    const shown = await page.evaluate(() => /** @type {any} */ (window).bench.shown);
    return { shown, byShown, busy: (await metrics(cdp)).TaskDuration, ...await probed(page) };
}

/** One more turn sent as Enter sends it (composer.js), without Playwright's locators' queries. @param {import("@playwright/test").Page} page @param {import("@playwright/test").CDPSession} cdp @param {string} text */
async function turn(page, cdp, text) {
    await page.evaluate(() => {
        const w = /** @type {any} */ (window);
        Object.assign(w.bench, { long: [], sets: [] });
        w.bench.idle = new Promise((resolve) => {
            const off = w.gatewayClient.on("idle", (/** @type {{replayed: boolean}} */ { replayed }) => { if (!replayed) { off(); resolve(undefined); } });
        });
    });
    const before = await metrics(cdp);
    await page.evaluate((text) => {
        const prompt = /** @type {HTMLTextAreaElement} */ (document.querySelector("[data-testid=prompt]"));
        prompt.value = text;
        prompt.form?.requestSubmit();
    }, text);
    await page.evaluate(() => /** @type {any} */ (window).bench.idle);
    await sleep(2500);
    const after = await metrics(cdp);
    return { busy: after.TaskDuration - before.TaskDuration, layout: after.LayoutDuration - before.LayoutDuration, ...await probed(page) };
}

const browser = await launch();
try {
    console.log(`chats of N turns: replies of ${reply.replaceAll("${1}", "500").length} bytes of Markdown, 3 words a delta, get_local_time every 5th turn; medians of ${reps}`);
    for (const n of sizes) {
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        await context.request.get(`${url}/`); // the identity cookie
        const helper = await context.newPage();
        await helper.goto(`${url}/healthz`);
        const t0 = performance.now();
        const chat = await build(helper, n);
        console.log(`N=${n}: ${chat.seq} events, built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        await helper.close();

        const page = await context.newPage();
        await page.addInitScript(probe);
        page.on("pageerror", (e) => console.error(`  page error: ${e}`));
        await page.goto(`${url}/healthz`);
        await page.evaluate(({ session, last }) => {
            sessionStorage.setItem("gateway.session", JSON.stringify({ v: 1, session, seq: 0, events: [], unsent: [] }));
            sessionStorage.setItem("bench.last", last);
        }, { session: chat.session, last: `End of turn ${n}.` });
        await page.goto(`${url}/`);
        await page.waitForFunction((seq) => /** @type {any} */ (window).gatewayClient?.seq >= seq, chat.seq, { timeout: 600_000, polling: 200 });
        await sleep(2500);
        const cdp = await context.newCDPSession(page);
        await cdp.send("Performance.enable");

        /** @type {Record<string, Record<string, number>[]>} */
        const runs = { storage: [], gateway: [], turn: [] };
        for (let rep = 0; rep < reps; rep++) {
            runs.storage.push(await reload(page, cdp, "storage"));
            runs.gateway.push(await reload(page, cdp, "gateway"));
        }
        for (let rep = 0; rep < reps; rep++) {
            runs.turn.push(await turn(page, cdp, `more ${n + 1 + rep}`));
        }
        const m = Object.fromEntries(Object.entries(runs).map(([k, rs]) => [k, Object.fromEntries(Object.keys(rs[0]).map((f) => [f, median(rs.map((r) => r[f]))]))]));
        const ms = (/** @type {number} */ x) => `${x.toFixed(0)} ms`;
        const writes = (/** @type {Record<string, number>} */ r) => `${r.writes} write${r.writes === 1 ? "" : "s"}, ${(r.chars / 1e6).toFixed(2)} MB, setItem ${ms(r.setMs)}`;
        for (const from of /** @type {const} */ (["storage", "gateway"])) {
            const r = m[from];
            console.log(`  reload from ${from.padEnd(7)}: shown at ${ms(r.shown)}; main thread busy ${ms(r.byShown)} by then, ${ms(r.busy)} by 2.5 s later; longest task ${ms(r.longest)}; ${writes(r)}`);
        }
        console.log(`  one more turn       : main thread busy ${ms(m.turn.busy)}, layout ${ms(m.turn.layout)}; longest task ${ms(m.turn.longest)}; ${writes(m.turn)}`);
        await context.close();
    }
} finally {
    await browser.close();
    await gateway.stop();
}
