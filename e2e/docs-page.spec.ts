// The complete page of docs/sdk.md ("A complete page"), taken from the doc
// itself and run against the demo gateway, so the doc cannot rot: the block
// after the `<!-- e2e: docs-page -->` marker is served on the gateway's
// origin, and asking "what time is it" runs its browser tool and gets the
// model's reply with the page's time.
import { readFileSync } from "node:fs";
import { expect, test } from "./support";

const doc = readFileSync(new URL("../docs/sdk.md", import.meta.url), "utf8");
const block = /<!-- e2e: docs-page -->\s*```html\n([\s\S]*?)\n```/.exec(doc);

// The page's clock: the tool returns it, and the model says it back.
const NOW = "2026-05-01T05:05:00.000Z";

// A page fulfilled by the test has no server address, so Chromium takes it
// for a public site and refuses its WebSocket to 127.0.0.1 (local network
// access) unless allowed; a real page served from the gateway needs no such
// permission.
test.use({ timezoneId: "Asia/Tokyo", permissions: ["local-network-access"] });

test("the complete page of docs/sdk.md runs its browser tool and shows the reply", async ({ page }) => {
    expect(block, "docs/sdk.md has an ```html block after <!-- e2e: docs-page -->").not.toBeNull();
    const html = block![1];
    expect(html).toContain('from "/static/gateway.js"');

    // A path the gateway does not serve, fulfilled with the doc's page: same
    // origin as /ws and /static/, as a page of the user's own would be.
    await page.route("**/docs-page.html", (route) => route.fulfill({ contentType: "text/html; charset=utf-8", body: html }));
    await page.clock.setFixedTime(new Date(NOW));
    // Every text the last assistant line shows, in order.
    await page.addInitScript(() => {
        const w = window as any;
        w.__replies = [];
        addEventListener("DOMContentLoaded", () => {
            new MutationObserver(() => {
                const text = [...document.querySelectorAll("li.assistant")].at(-1)?.textContent;
                if (text && text !== w.__replies.at(-1)) w.__replies.push(text);
            }).observe(document.getElementById("log")!, { subtree: true, childList: true, characterData: true });
        });
    });
    await page.goto("/docs-page.html");
    await expect(page.getByRole("status")).toHaveText("open");

    const input = page.getByLabel("Message");
    await input.fill("what time is it");
    await page.getByRole("button", { name: "Send" }).click();
    await expect(input).toHaveValue("");

    const log = page.getByRole("listitem");
    await expect(page.locator("li.user")).toHaveText(["what time is it"]);
    await expect(page.locator("li.tool")).toHaveText(["get_local_time: done"]);
    await expect(page.locator("li.assistant")).toHaveText([
        "Let me ask your page for the time.",
        `Your page says it's ${NOW} in Asia/Tokyo.`,
    ]);
    // In the order they happened: the question, the reply that calls the tool, its status, the answer.
    await expect(log).toHaveText([
        "what time is it",
        "Let me ask your page for the time.",
        "get_local_time: done",
        `Your page says it's ${NOW} in Asia/Tokyo.`,
    ]);

    // A screen reader hears the finished reply, once, not the log's every piece.
    await expect(page.locator("#said")).toHaveText(`Your page says it's ${NOW} in Asia/Tokyo.`);
    await expect(page.locator("#log")).not.toHaveAttribute("aria-live", /.*/);

    // The replies streamed in: the page showed them growing, piece by piece.
    const seen: string[] = await page.evaluate(() => (window as any).__replies);
    const answer = `Your page says it's ${NOW} in Asia/Tokyo.`;
    const partial = seen.filter((t) => t !== answer && answer.startsWith(t));
    expect(partial.length, `partial replies shown: ${JSON.stringify(seen)}`).toBeGreaterThan(1);
});
