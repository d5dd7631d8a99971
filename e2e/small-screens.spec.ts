// The chat page on small and short screens, where the page (under 30rem
// tall) or the log scrolls: a reader at the bottom is followed there
// whatever moves the page under them (the browser's scroll anchoring, a
// phone turned), and what the page must show stays on the screen.
import type { Locator, Page } from "@playwright/test";
import { attachWire, expect, test, Chat, scrolled, type Wire } from "./support";

/** How far what scrolls the conversation is from its bottom. */
const below = async (page: Page) => (await scrolled(page)).below;

/**
 * Drops the page's socket and keeps it down (the browser offline, so the
 * SDK's tries fail) until the returned function brings it back; the failed
 * tries' console errors are expected.
 */
async function dropAndHold(page: Page, wire: Wire, pageErrors: string[]) {
    await page.context().setOffline(true);
    await wire.drop();
    await expect(page.getByTestId("connection-status")).not.toHaveAttribute("data-state", "open");
    return async () => {
        await page.context().setOffline(false);
        await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");
        const offline = /ERR_INTERNET_DISCONNECTED/;
        pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !offline.test(e)));
    };
}

/** Sends text with the focus left elsewhere (the browser keeps a focused box's caret in view). */
async function sendAway(chat: Chat, page: Page, text: string) {
    await chat.send(text);
    await page.evaluate(() => (document.activeElement as HTMLElement).blur());
}

/** Opens the chat at viewport with two long answers; the second still streaming unless done. */
async function twoLongAnswers(page: Page, viewport: { width: number; height: number }, second: "streaming" | "done") {
    await page.setViewportSize(viewport);
    const chat = await Chat.open(page);
    await sendAway(chat, page, "stream a long answer");
    await chat.idle();
    await sendAway(chat, page, "stream a long answer");
    if (second === "done") await chat.idle();
    else await expect(chat.reply("Here is").nth(1)).toHaveAttribute("data-streaming", "true");
    return chat;
}

/** Where el is: its top below the top of what scrolls the conversation (the log, or the page), and its height. */
const placed = (el: Locator) => el.evaluate((el) => {
    const log = document.querySelector<HTMLElement>("[data-testid=messages]")!;
    const view = getComputedStyle(log).overflowY === "visible" ? 0 : log.getBoundingClientRect().top;
    const r = el.getBoundingClientRect();
    return { top: r.top - view, height: r.height };
});

/** Scrolls what scrolls the conversation by dy, as the reader does, and lets the page read it (its scroll event comes with a frame). */
async function scrollBy(page: Page, dy: number) {
    await page.evaluate((dy) => {
        const log = document.querySelector<HTMLElement>("[data-testid=messages]")!;
        (getComputedStyle(log).overflowY === "visible" ? document.scrollingElement! : log).scrollTop += dy;
    }, dy);
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
}

for (const { name, viewport } of [
    { name: "a short window (the page scrolls)", viewport: { width: 480, height: 320 } },
    { name: "a phone (the log scrolls)", viewport: { width: 360, height: 640 } },
]) {
    test(`in ${name}, the reply to a message sent offline is followed once the connection is back`, async ({ page, pageErrors }) => {
        await page.setViewportSize(viewport);
        const wire = await attachWire(page);
        const chat = await Chat.open(page);
        await sendAway(chat, page, "stream a long answer");
        await chat.idle();
        expect(await below(page), "at the bottom").toBeLessThan(48);

        // Down, and kept down, while the reader sends.
        const back = await dropAndHold(page, wire, pageErrors);
        await sendAway(chat, page, "stream a long answer");
        await expect(chat.messages("user").last().getByTestId("message-queued")).toBeVisible();
        await back();

        await expect(chat.reply("Here is")).toHaveCount(2);
        await chat.idle();
        expect(await below(page), "the reply followed to its end").toBeLessThan(48);
    });
}

for (const [from, to] of [
    [{ width: 360, height: 640 }, { width: 640, height: 360 }],
    [{ width: 640, height: 360 }, { width: 360, height: 640 }],
    [{ width: 1024, height: 600 }, { width: 1024, height: 400 }],
]) {
    test(`a window turned from ${from.width}x${from.height} to ${to.width}x${to.height} keeps the reader at the bottom, and following`, async ({ page }) => {
        const chat = await twoLongAnswers(page, from, "streaming");
        await page.setViewportSize(to);
        await chat.idle();
        expect(await below(page), "at the bottom after the turn, the reply followed").toBeLessThan(48);
    });
}

test("a reader who scrolled up, then turned the phone, is followed again once back at the bottom", async ({ page }) => {
    const chat = await twoLongAnswers(page, { width: 360, height: 640 }, "streaming");
    await page.getByTestId("messages").evaluate((log) => log.scrollTo(0, 0)); // up, to read
    await page.setViewportSize({ width: 640, height: 360 });
    await page.evaluate(() => window.scrollTo(0, document.scrollingElement!.scrollHeight)); // down again
    await chat.idle();
    expect(await below(page), "followed to the reply's end").toBeLessThan(48);
});

for (const [from, to] of [
    [{ width: 360, height: 640 }, { width: 640, height: 360 }],
    [{ width: 640, height: 360 }, { width: 360, height: 640 }],
]) {
    test(`a reader who scrolled up keeps what they read when the window turns from ${from.width}x${from.height} to ${to.width}x${to.height}`, async ({ page }) => {
        const chat = await twoLongAnswers(page, from, "done");
        // Up, to the second message, 10 px below the top of what scrolls:
        // the log on a phone, the page in a short window.
        const reading = chat.messages("user").nth(1);
        await scrollBy(page, (await placed(reading)).top - 10);
        const off = async () => Math.abs(Math.round((await placed(reading)).top) - 10); // a pixel's rounding either way
        await expect.poll(off).toBeLessThan(2);
        await page.setViewportSize(to);
        await expect.poll(off, "what they read is where it was").toBeLessThan(2);
        await expect(reading).toBeInViewport();
    });
}

test("a reader halfway through a long reply is halfway through it after the phone turns, though it reflows", async ({ page }) => {
    const chat = await twoLongAnswers(page, { width: 360, height: 640 }, "done");
    const reply = chat.reply("Here is").first();
    // How far into the reply the top of what scrolls is, as a part of its height.
    const into = async () => {
        const { top, height } = await placed(reply);
        return -top / height;
    };
    const { top, height: before } = await placed(reply);
    await scrollBy(page, top + before / 2);
    await expect.poll(async () => Math.abs((await into()) - 0.5)).toBeLessThan(0.02);
    await page.setViewportSize({ width: 640, height: 360 });
    await expect.poll(async () => Math.abs((await into()) - 0.5), "halfway through it still").toBeLessThan(0.05);
    expect((await placed(reply)).height, "the reply reflowed").toBeLessThan(before * 0.8);
});

test("in a short window a lost connection stays on the screen", async ({ page, pageErrors }) => {
    await page.setViewportSize({ width: 480, height: 320 });
    const wire = await attachWire(page);
    const chat = await Chat.open(page);
    await sendAway(chat, page, "stream a long answer");
    await chat.idle();
    const status = page.getByTestId("connection-status");
    await expect(status, "scrolled away with the page while connected").not.toBeInViewport();
    const back = await dropAndHold(page, wire, pageErrors);
    await expect(status).toBeInViewport({ ratio: 1 });
    await back();
    await expect(status, "gone with the page again once connected").not.toBeInViewport();
});

test("in a short window New chat shows the welcome from its top", async ({ page }) => {
    await page.setViewportSize({ width: 480, height: 320 });
    const chat = await Chat.open(page);
    await sendAway(chat, page, "what time is it");
    await chat.idle();
    await page.getByRole("button", { name: "New chat" }).click();
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    await expect(page.getByTestId("prompt")).toBeFocused();
    await expect(page.getByTestId("empty-chat").getByRole("heading")).toBeInViewport({ ratio: 1 });
});

// The order a loaded machine can give the turn above: the reader is at the
// new scroller's bottom before the page has looked at it (its resize event
// waits for the next frame, and a delta may come first). Played on the
// module itself, where the order is the test's.
test("a reader already at the bottom of the scroller the window switched to is followed", async ({ page }) => {
    await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
    await page.goto("/healthz");
    const below = await page.evaluate(async () => {
        const { followLog } = await import("/static/follow.js");
        const frames = (n: number) => new Promise<void>((resolve) => {
            const next = () => (n-- === 0 ? resolve() : requestAnimationFrame(next));
            next();
        });
        const line = () => Object.assign(document.createElement("p"), { textContent: "line", style: "height: 20px; margin: 0" });
        document.body.replaceChildren();
        document.body.style.margin = "0";
        const log = document.createElement("div");
        log.style.cssText = "height: 200px; overflow-y: auto";
        document.body.append(log);
        for (let i = 0; i < 60; i++) log.append(line());
        const { follow, unmount } = followLog(log);
        follow(); // at the bottom
        await frames(2);
        log.scrollTop = 0; // up, to read
        await frames(2);
        log.style.overflowY = "visible"; // the window switched: the page scrolls
        window.scrollTo(0, document.scrollingElement!.scrollHeight); // down again, at once
        log.append(line()); // the next delta, before any event
        await frames(2);
        for (let i = 0; i < 10; i++) {
            log.append(line());
            await frames(1);
        }
        const s = document.scrollingElement!;
        unmount();
        return s.scrollHeight - s.scrollTop - s.clientHeight;
    });
    expect(below, "followed to the end").toBeLessThan(48);
});
