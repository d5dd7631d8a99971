// What the page benchmarks (markdown.mjs, stream.mjs) share: the Markdown
// of a long reply, and the browser they measure it in.
import { chromium } from "@playwright/test";

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
