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
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { blocks, launch } from "./reply.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const reply = blocks(48);

/** A port free on loopback now. @returns {Promise<number>} */
const freePort = () => new Promise((resolve, reject) => {
    const s = createServer().once("error", reject).listen(0, "127.0.0.1", () => {
        const { port } = /** @type {import("node:net").AddressInfo} */ (s.address());
        s.close(() => resolve(port));
    });
});

const dir = await mkdtemp(join(tmpdir(), "bench-stream-"));
const script = join(dir, "script.json");
await writeFile(script, JSON.stringify({
    rules: [{ match: "^long markdown$", chunkWords: 5, delay: "5ms", say: reply }],
    fallback: "Say: long markdown",
}));
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const gateway = spawn(join(root, "bin/gateway"), ["--listen", `127.0.0.1:${port}`, "--data-dir", join(dir, "data"), "--log-level", "error", "--script", script], { stdio: ["ignore", "ignore", "inherit"] });
const browser = await launch();
try {
    for (let tries = 0; ; tries++) {
        const up = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
        if (up) break;
        if (tries > 100) throw new Error(`the gateway did not answer on ${url} in 10 s`);
        await new Promise((r) => setTimeout(r, 100));
    }
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
    if (gateway.exitCode === null && gateway.signalCode === null) {
        const exited = new Promise((r) => gateway.once("exit", r));
        gateway.kill("SIGTERM");
        await exited;
    }
    await rm(dir, { recursive: true, force: true });
}
