// The chat page's cost of rendering a streamed reply (static/markdown.js), in
// Chromium: `make bench-page`, or `node e2e/bench/markdown.mjs` after `make
// deps`. Not a test: it asserts nothing, and prints what one render costs.
//
// A reply of each size (Markdown with headings, paragraphs, a list, a code
// block and a table, over and over; then one long numbered list and one
// long table, each a single block, whose items or rows are what is kept)
// is rendered as the page renders it while it streams: into the same
// element, 100 characters more each time, the layout read after each render (the page's follow.js reads it once a
// frame). Beside it, the same texts made whole each time (toSafeFragment,
// the element's children replaced): what every render cost when the page
// made the whole reply anew.
// "at its end" is the mean of the last 20 renders, where a long reply costs
// the most.
//
// The page is a bare one with the chat page's stylesheet, served from
// static/ by a server of this script's own on loopback; CHROMIUM names the
// browser (default /usr/bin/chromium).
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { blocks, launch, oneList, oneTable } from "./reply.mjs";

const staticDir = fileURLToPath(new URL("../../static/", import.meta.url));
const types = { ".js": "text/javascript", ".css": "text/css", ".html": "text/html" };
const page = `<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="/app.css"></head>
<body><main><ol class="message-list"><li class="message" data-role="assistant"><div class="message-text" id="target"></div></li></ol></main></body></html>`;

const server = createServer(async (req, res) => {
    const path = normalize(new URL(req.url ?? "/", "http://x").pathname);
    if (path === "/") return res.writeHead(200, { "content-type": "text/html" }).end(page);
    try {
        const body = await readFile(join(staticDir, path));
        res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
    } catch {
        res.writeHead(404).end();
    }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());

const browser = await launch();
try {
    const tab = await browser.newPage();
    await tab.goto(`http://127.0.0.1:${port}/`);
    // The first text warms the page up (its code compiled, its styles
    // resolved) and is not shown.
    const texts = [
        { shape: "blocks", text: blocks(4) },
        { shape: "blocks", text: blocks(4) },
        { shape: "blocks", text: blocks(16) },
        { shape: "blocks", text: blocks(64) },
        { shape: "one list", text: oneList(400) },
        { shape: "one table", text: oneTable(400) },
    ];
    const rows = await tab.evaluate(async (texts) => {
        const { renderMarkdown, toSafeFragment } = await import("/markdown.js");
        const target = /** @type {HTMLElement} */ (document.getElementById("target"));
        /** @param {(text: string) => void} render @param {string} text */
        const stream = (render, text) => {
            const times = [];
            for (let at = 100; at <= text.length; at += 100) {
                const t0 = performance.now();
                render(text.slice(0, at));
                void target.offsetHeight;
                times.push(performance.now() - t0);
            }
            const mean = (/** @type {number[]} */ t) => t.reduce((a, b) => a + b, 0) / t.length;
            return { renders: times.length, mean: mean(times), end: mean(times.slice(-20)) };
        };
        const out = [];
        for (const [i, { shape, text }] of texts.entries()) {
            const streamed = () => {
                target.replaceChildren();
                return stream((t) => renderMarkdown(target, t), text);
            };
            // The whole text parsed, cleaned and put in anew each time.
            const whole = () => stream((t) => target.replaceChildren(toSafeFragment(document, t)), text);
            // Either way first in turn: the second pays for the first's garbage.
            let s, w;
            if (i % 2) {
                s = streamed();
                w = whole();
            } else {
                w = whole();
                s = streamed();
            }
            out.push({ shape, bytes: text.length, streamed: s, whole: w });
        }
        return out.slice(1);
    }, texts);
    // A chat's finished replies, each rendered once on an element of its
    // own, as a reload or a replay renders them.
    const replayed = await tab.evaluate(async (reply) => {
        const { renderMarkdown, toSafeFragment } = await import("/markdown.js");
        const list = /** @type {HTMLElement} */ (document.querySelector(".message-list"));
        /** @param {(el: HTMLElement) => void} render */
        const replay = (render) => {
            const t0 = performance.now();
            for (let i = 0; i < 300; i++) {
                const el = document.createElement("div");
                render(el);
                list.append(el);
            }
            void list.offsetHeight;
            const ms = (performance.now() - t0) / 300;
            list.replaceChildren();
            return ms;
        };
        const ways = {
            renderMarkdown: (/** @type {HTMLElement} */ el) => renderMarkdown(el, reply),
            whole: (/** @type {HTMLElement} */ el) => el.replaceChildren(toSafeFragment(document, reply)),
        };
        ways.renderMarkdown(document.createElement("div")); // warm-up
        ways.whole(document.createElement("div"));
        /** @type {Record<string, number[]>} */
        const times = { renderMarkdown: [], whole: [] };
        for (let i = 0; i < 7; i++) {
            // Either way first in turn, as above.
            for (const way of i % 2 ? ["renderMarkdown", "whole"] : ["whole", "renderMarkdown"]) times[way].push(replay(ways[way]));
        }
        const median = (/** @type {number[]} */ t) => t.sort((a, b) => a - b)[t.length >> 1];
        return { renderMarkdown: median(times.renderMarkdown), whole: median(times.whole) };
    }, blocks(1));
    console.log(`a chat's 300 replies of ${blocks(1).length} bytes (a heading, a paragraph, a list, code, a table), each rendered once, ` +
        `ms a reply (median of 7): renderMarkdown ${replayed.renderMarkdown.toFixed(2)}, toSafeFragment ${replayed.whole.toFixed(2)}`);
    console.log("a reply streamed 100 characters a render (ms a render: mean, and at its end)");
    console.log(`${"reply".padStart(19)} ${"renders".padStart(8)} ${"streamed".padStart(17)} ${"made whole".padStart(17)}`);
    for (const { shape, bytes, streamed, whole } of rows) {
        const f = (/** @type {{mean: number, end: number}} */ r) => `${r.mean.toFixed(2).padStart(7)} ${r.end.toFixed(2).padStart(7)}  `;
        console.log(`${shape.padStart(8)} ${(bytes / 1024).toFixed(1).padStart(6)} KiB ${String(streamed.renders).padStart(8)}  ${f(streamed)} ${f(whole)}`);
    }
} finally {
    await browser.close();
    server.close();
}
