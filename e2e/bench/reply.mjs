// What the page benchmarks (markdown.mjs, stream.mjs, longchat.mjs) share:
// the Markdown of a long reply, the browser they measure it in, and a
// gateway of their own with a script of theirs.
import { chromium } from "@playwright/test";
import { rmSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startGateway } from "../../testkit/gateway.js";

const para = "Here is **some** text with `code` and a [link](https://example.com/x) in a sentence that goes on a while. ";
const block = `## Heading\n\n${para.repeat(4)}\n\n- item one ${para}\n- item two\n\n\`\`\`js\nconst x = 1;\nfunction f(a) { return a + 1; }\n\`\`\`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n`;

/** A reply of many small blocks: headings, paragraphs, a short list, a code block and a table, copies times (655 bytes each). @param {number} copies */
export const blocks = (copies) => block.repeat(copies);

/** A reply that is one numbered list of n items, a single top-level block. @param {number} n */
export const oneList = (n) => Array.from({ length: n }, (_, i) => `${i + 1}. Step ${i + 1}: run \`make\` and read **what it says**.\n`).join("");

/** A reply that is one table of n rows under its header, a single top-level block. @param {number} n */
export const oneTable = (n) => "| step | command | what it says |\n| ---: | --- | :-- |\n" +
    Array.from({ length: n }, (_, i) => `| ${i + 1} | \`make test-${i + 1}\` | **ok**, ${i + 1} checks passed |\n`).join("");

/** Chromium as the Playwright specs run it; CHROMIUM names it (default /usr/bin/chromium). */
export const launch = () => chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});

/**
 * bin/gateway started by the test kit on loopback with script (docs/scripts.md),
 * written to a folder of its own, and options (the kit's: store, args).
 * stop() stops it and removes the folder; so does the process's exit (a
 * Ctrl-C in Playwright's handler exits at once).
 * @param {object} script @param {import("../../testkit/index.js").GatewayOptions} [options]
 */
export async function scriptedGateway(script, options = {}) {
    const dir = await mkdtemp(join(tmpdir(), "bench-"));
    await writeFile(join(dir, "script.json"), JSON.stringify(script));
    const gateway = await startGateway({
        binary: fileURLToPath(new URL("../../bin/gateway", import.meta.url)), logLevel: "error", ...options, script: join(dir, "script.json"),
    });
    const left = () => {
        if (gateway.pid) try { process.kill(gateway.pid); } catch { /* gone */ }
        rmSync(dir, { recursive: true, force: true });
    };
    process.once("exit", left);
    return {
        url: gateway.url,
        async stop() {
            process.off("exit", left);
            await gateway.stop();
            await rm(dir, { recursive: true, force: true });
        },
    };
}
