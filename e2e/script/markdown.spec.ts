// The assistant's text is Markdown, rendered as it streams (static/markdown.js),
// and never live HTML. The replies come from script.json next to this file.
import { expect, test, Chat } from "../support";

test.use({ permissions: ["clipboard-read", "clipboard-write"] });

test("a streamed Markdown reply renders as it streams, and its code block copies", async ({ page }) => {
    const chat = await Chat.open(page);
    // Note, in the page, whether Markdown was already rendered mid-stream.
    await page.evaluate(() => {
        const w = window as any;
        w.__midStream = false;
        new MutationObserver(() => {
            if (document.querySelector('[data-testid="message"][data-streaming="true"] [data-testid="message-text"] strong')) w.__midStream = true;
        }).observe(document.querySelector('[data-testid="messages"]')!, { subtree: true, childList: true });
    });
    await chat.send("markdown please");

    const reply = chat.reply("Here is bold text");
    await expect(reply).toHaveAttribute("data-streaming", "false");
    const text = reply.getByTestId("message-text");
    await expect(text.locator("strong")).toHaveText("bold");
    await expect(text.locator("ul > li")).toHaveText(["first", "second"]);
    await expect(text.locator("th")).toHaveText(["tool", "handler"]);
    await expect(text.locator("td")).toHaveText(["get_weather", "worker"]);
    const link = text.getByRole("link", { name: "the docs" });
    await expect(link).toHaveAttribute("href", "https://example.com/docs");
    await expect(link).toHaveAttribute("target", "_blank");
    await expect(link).toHaveAttribute("rel", "noopener noreferrer");
    expect(await page.evaluate(() => (window as any).__midStream), "Markdown rendered while streaming").toBe(true);

    const code = text.locator("pre > code");
    await expect(code).toHaveCount(1);
    await expect(code).toHaveText("const answer = 42;\nconsole.log(answer);\n");
    const copy = text.getByRole("button", { name: "Copy js code" });
    await expect(copy).toHaveAttribute("data-testid", "copy-code");
    await copy.click();
    await expect(copy).toHaveText("Copied");
    await expect.poll(() => page.getByTestId("announcer").locator("p").allTextContents(), "said to a screen reader").toContain("Copied.");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("const answer = 42;\nconsole.log(answer);\n");
    await expect(copy).toHaveText("Copy");
});

test("raw HTML and script links from the model show as text, never as live markup", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("html please");
    const reply = chat.reply("Look:");
    await expect(reply).toHaveAttribute("data-streaming", "false");
    const text = reply.getByTestId("message-text");

    // The tags are there to read, as text.
    await expect(text).toContainText(`<img src=x onerror="window.__pwned = 'img'">`);
    await expect(text).toContainText(`<script>window.__pwned = 'script'</script>`);
    await expect(text).toContainText(`<b onclick="window.__pwned='b'">bold</b>`);
    await expect(text.locator("img, script, b, iframe, [onclick], [onerror]")).toHaveCount(0);
    // The javascript: link lost its target, and clicking it runs nothing.
    const link = text.locator("a").filter({ hasText: "a link" });
    await expect(link).not.toHaveAttribute("href", /.*/);
    await link.click();
    const attrs = await text.evaluate((el) => [...el.querySelectorAll("*")].flatMap((n) => [...n.attributes].map((a) => a.name)));
    expect(attrs.filter((a) => a.startsWith("on"))).toEqual([]);
    expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
});
