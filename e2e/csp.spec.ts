// The chat page's Content-Security-Policy (web.Handler): its own scripts
// run, and HTML that got past the Markdown sanitizer runs nothing. Every
// spec checks the first half too, as a blocked script or socket is a
// console error, which fails any test (support.ts).
import { expect, test, Chat } from "./support";

test("the page runs its own scripts and socket under its policy", async ({ page }) => {
    const response = await page.goto("/");
    const policy = response?.headers()["content-security-policy"] ?? "";
    expect(policy).toContain("script-src 'self' 'sha256-");
    expect(policy).toContain("object-src 'none'");
    expect(policy).toContain("frame-ancestors 'self'");
    const chat = new Chat(page);
    await chat.connected();
    await chat.send("what time is it");
    await expect(chat.cards("get_local_time")).toHaveAttribute("data-status", "done");
    await chat.idle();
});

test("HTML that got past the sanitizer runs nothing", async ({ page, pageErrors }) => {
    await Chat.open(page);
    // What a way past DOMPurify would put in the log: an inline handler and
    // a javascript: link, clicked.
    await page.evaluate(() => {
        const log = document.querySelector('[data-testid="messages"]')!;
        log.insertAdjacentHTML("beforeend",
            `<img src="/static/no-such-image.png" onerror="window.__ran = 'onerror'">` +
            `<a id="evil" href="javascript:void(window.__ran = 'href')">x</a>`);
    });
    await page.locator("#evil").click();
    // The image's error has fired once its load failed (the page's own 404).
    await expect.poll(() => page.evaluate(() => (document.querySelector('img[src$="no-such-image.png"]') as HTMLImageElement).complete)).toBe(true);
    expect(await page.evaluate(() => (window as any).__ran)).toBeUndefined();
    // The refusals, and the image's 404, are this test's own errors.
    const expected = /Content Security Policy|no-such-image|404/;
    expect(pageErrors.filter((e) => expected.test(e)).length, "the browser said it refused").toBeGreaterThan(0);
    pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !expected.test(e)));
});
