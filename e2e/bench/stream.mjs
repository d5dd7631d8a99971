// The chat page's main thread while a long Markdown reply streams into it:
// `make bench-page`, or `node e2e/bench/stream.mjs` after `make deps build`.
// Not a test: it asserts nothing, and prints what the page spent.
//
// It starts bin/gateway on loopback with a script of its own (docs/scripts.md):
// "long markdown" says about 31 KiB of Markdown (headings, paragraphs, a
// short list, a code block and a table, over and over), 5 words a delta,
// 5 ms apart. The chat page, in Chromium, sends it; from the send to the
// reply's end it reads the page's Performance metrics (its main thread's
// tasks, script, style and layout) and counts its long tasks (over 50 ms,
// what a reader feels as a page that does not answer). Three runs, each
// on a page of its own. CHROMIUM names the browser (default
// /usr/bin/chromium).
import { blocks, launch, scriptedGateway } from "./reply.mjs";

const reply = blocks(48);
const gateway = await scriptedGateway({
    rules: [{ match: "^long markdown$", chunkWords: 5, delay: "5ms", say: reply }],
    fallback: "Say: long markdown",
}, { store: "jetstream" });
const { url } = gateway;
const browser = await launch();
try {
    console.log(`a ${(reply.length / 1024).toFixed(1)} KiB Markdown reply streamed into the chat page (5 words a delta, 5 ms apart)`);
    for (let run = 1; run <= 3; run++) {
        const page = await browser.newPage();
        await page.goto(`${url}/`);
        await page.getByTestId("prompt").waitFor();
        const cdp = await page.context().newCDPSession(page);
        await cdp.send("Performance.enable");
        const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
        await page.evaluate(() => {
            const w = /** @type {any} */ (window);
            w.benchLongTasks = [];
            new PerformanceObserver((list) => { for (const e of list.getEntries()) w.benchLongTasks.push(e.duration); }).observe({ type: "longtask" });
        });
        const before = await metrics();
        const t0 = performance.now();
        await page.getByTestId("prompt").fill("long markdown");
        await page.getByTestId("prompt").press("Enter");
        // Polled every 200 ms: a check at each frame would cost the page frames.
        await page.waitForFunction(() => document.querySelector("[data-streaming=false]") && !document.querySelector("[data-streaming=true]"), null, { timeout: 120_000, polling: 200 });
        const after = await metrics();
        const seconds = (performance.now() - t0) / 1000;
        /** @type {number[]} */
        const long = await page.evaluate(() => /** @type {any} */ (window).benchLongTasks);
        const spent = (/** @type {string} */ k) => after[k] - before[k];
        console.log(`  run ${run}: ${seconds.toFixed(1)} s; main thread busy ${(100 * spent("TaskDuration") / seconds).toFixed(0)}% ` +
            `(script ${spent("ScriptDuration").toFixed(2)} s, style ${spent("RecalcStyleDuration").toFixed(2)} s, layout ${spent("LayoutDuration").toFixed(2)} s); ` +
            `long tasks ${long.length}${long.length ? `, the longest ${Math.max(...long).toFixed(0)} ms` : ""}`);
        await page.close();
    }
} finally {
    await browser.close();
    await gateway.stop();
}
