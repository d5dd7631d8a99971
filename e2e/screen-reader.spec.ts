// What a screen reader hears: the announcer (docs/ui.md#screen-readers)
// says each thing once, the log itself is silent, a replay says nothing,
// and the focus never falls to <body> when the button under it goes.
import type { Page } from "@playwright/test";
import { expect, test, Chat, installFakeSocket, ofType, openOnFakeSocket, scrolled } from "./support";

/** The sentences the announcer holds, oldest first. */
const said = (page: Page) => page.getByTestId("announcer").locator("p").allTextContents();

test("a streamed reply is said once, when it is finished; the log is not live", async ({ page }) => {
    const chat = await Chat.open(page);
    const log = page.getByRole("log", { name: "Conversation" });
    await expect(log).toHaveAttribute("aria-live", "off");
    await chat.send("stream a long answer");
    await expect(chat.reply("Here is")).toHaveAttribute("data-streaming", "true");
    await expect(log).not.toHaveAttribute("aria-busy", /.*/);
    await chat.idle();
    const events = await chat.events();
    expect(ofType(events, "model.delta").length, "the reply came in pieces").toBeGreaterThan(3);
    await expect.poll(() => said(page)).toHaveLength(1);
    const [reply] = await said(page);
    expect(reply).toMatch(/^Assistant: Here is/);
    expect(reply, "said without Markdown's marks").not.toMatch(/\*\*|`/);
});

test("a call's outcome is said; a reload's replay says nothing", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what's the weather in Tokyo");
    await chat.idle();
    await expect.poll(() => said(page)).toEqual([
        "Assistant: Let me check the weather in Tokyo.",
        "get_weather: done.",
        "Assistant: get_weather returned: It's clear in Tokyo.",
    ]);

    await page.reload();
    await chat.connected();
    await expect(chat.cards("get_weather")).toHaveAttribute("data-status", "done");
    await expect(chat.reply("clear in Tokyo")).toBeVisible();
    expect(await said(page), "a replay is history, not news").toEqual([]);

    // The page's copy lost (over the storage's quota: the session's id
    // alone): the whole chat comes from the gateway, history too.
    await page.evaluate(() => {
        const { session } = JSON.parse(sessionStorage.getItem("gateway.session")!);
        addEventListener("pagehide", () => sessionStorage.setItem("gateway.session", JSON.stringify({ v: 1, session, seq: 0, events: [], unsent: [] })));
    });
    await page.reload();
    await chat.connected();
    await expect(chat.cards("get_weather")).toHaveAttribute("data-status", "done");
    await expect(chat.reply("clear in Tokyo")).toBeVisible();
    expect(await said(page), "a replay of a chat the page lost is history too").toEqual([]);
});

test("confirm asks aloud, and after Approve the focus is on the answer", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const card = chat.cards("confirm");
    await expect.poll(() => said(page)).toContain("The assistant asks: Delete your draft? Approve or Deny.");
    await card.getByTestId("confirm-approve").focus();
    await page.keyboard.press("Enter");
    const answer = card.getByTestId("confirm-answer");
    await expect(answer).toHaveText("You approved.");
    await expect(answer).toBeFocused();
    await expect(card).toHaveAttribute("data-status", "done");
});

test("the approval gate is a group beside the card's line, said aloud, and keeps the focus", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test approval");
    const card = chat.cards("delete_file");
    const gate = card.getByRole("group", { name: "Allow delete_file to run with these arguments?" });
    await expect(gate).toBeVisible();
    await expect(card.locator("summary [data-testid=approve]"), "not inside the card's one line").toHaveCount(0);
    await expect.poll(() => said(page)).toContain("delete_file asks for your approval to run: Approve or Deny.");
    await gate.getByRole("button", { name: "Approve" }).focus();
    await page.keyboard.press("Space");
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(gate).toBeHidden();
    await expect(card.locator("summary").first()).toBeFocused();
    await expect.poll(() => said(page)).toContain("delete_file: done.");
});

// Stop's half second of grace is the page's time, which the test holds
// still: however slow the machine, the second Enter comes when the test
// says, not when the machine gets to it.
async function sendByEnterWithTheClockStill(page: Page) {
    await page.clock.install();
    const chat = await Chat.open(page);
    await page.getByTestId("prompt").fill("stream a long answer");
    await page.getByTestId("send").focus();
    await page.clock.pauseAt(await page.evaluate(() => Date.now() + 1000));
    await page.keyboard.press("Enter");
    await expect(page.getByTestId("stop")).toBeFocused();
    return chat;
}

test("a second Enter on Send does not stop the message it sent", async ({ page }) => {
    const chat = await sendByEnterWithTheClockStill(page);
    await page.keyboard.press("Enter");
    await page.clock.resume();
    await chat.idle();
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toHaveCount(0);
    expect(ofType(await chat.events(), "model.finished").at(-1)!.stopReason).toBe("end_turn");
});

test("Enter on Stop past its half second of grace stops the turn", async ({ page }) => {
    const chat = await sendByEnterWithTheClockStill(page);
    await page.clock.runFor(600);
    await page.keyboard.press("Enter");
    await page.clock.resume();
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toBeVisible();
    await chat.idle();
    expect(ofType(await chat.events(), "model.finished").at(-1)!.stopReason).toBe("cancelled");
});

test("a lost connection is said once, however many tries it takes, and so is its return", async ({ page }) => {
    await installFakeSocket(page, { replaceWebSocket: true });
    await page.goto("/");
    const open = (n: number) => page.evaluate(async (n) => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === n, 10_000);
        w.FakeSocket.last().accept();
        w.FakeSocket.last().push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
    }, n);
    await open(1);
    const status = page.getByTestId("connection-status");
    await expect(status).toHaveAttribute("data-state", "open");
    await expect(status).toHaveAttribute("aria-live", "off");
    for (let n = 1; n <= 3; n++) {
        await page.evaluate(async (n) => {
            const w = window as any;
            await w.until(() => w.FakeSocket.sockets.length === n, 10_000);
            w.FakeSocket.last().drop();
        }, n);
    }
    await open(4);
    await expect(status).toHaveAttribute("data-state", "open");
    expect(await said(page)).toEqual(["Connection lost. Retrying.", "Connected again."]);
});

test("an empty chat's log is no Tab stop; one with messages is", async ({ page }) => {
    const chat = await Chat.open(page);
    const log = page.getByTestId("messages");
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    await expect(log).toHaveAttribute("tabindex", "-1");
    await chat.send("what time is it");
    await expect(log).toHaveAttribute("tabindex", "0");
});

test("in a short window a focused Approve is in view, clear of the composer", async ({ page }) => {
    await page.setViewportSize({ width: 320, height: 256 });
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const approve = chat.cards("confirm").getByTestId("confirm-approve");
    await approve.focus();
    await expect(approve).toBeInViewport({ ratio: 1 });
    const button = (await approve.boundingBox())!;
    const composer = (await page.getByTestId("composer").boundingBox())!;
    expect(button.y + button.height, "above the composer kept at the bottom").toBeLessThanOrEqual(composer.y);
});

test("in a short window the page follows a streamed reply, and stays put once the reader scrolls up", async ({ page }) => {
    await page.setViewportSize({ width: 480, height: 320 });
    const chat = await Chat.open(page);
    await chat.send("stream a long answer");
    // The reader's focus elsewhere (the browser keeps a focused box's caret in view).
    await page.evaluate(() => (document.activeElement as HTMLElement).blur());
    await chat.idle();
    const followed = await scrolled(page);
    expect(followed.top, "the page had to scroll").toBeGreaterThan(0);
    expect(followed.below, "at the bottom: the reply's end above the composer").toBeLessThan(48);

    await chat.send("stream a long answer");
    await expect(chat.reply("Here is").nth(1)).toHaveAttribute("data-streaming", "true");
    await page.evaluate(() => window.scrollTo(0, 0));
    await chat.idle();
    expect((await scrolled(page)).top, "the reader who scrolled up stays there").toBe(0);
});

test("in a short window the list of chats showing the new one leaves the reader at the reply", async ({ page }) => {
    await page.setViewportSize({ width: 480, height: 320 });
    // The list answers only once the reply is in: the new chat is marked
    // there, above the screen, while the reader is at the bottom.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route("**/sessions", async (route) => {
        await held;
        await route.continue();
    });
    const chat = await Chat.open(page);
    await chat.send("stream a long answer");
    await page.evaluate(() => (document.activeElement as HTMLElement).blur());
    await chat.idle();
    expect((await scrolled(page)).below, "at the bottom before the list").toBeLessThan(48);
    release();
    await expect(page.getByTestId("history-item").and(page.locator("[aria-current]"))).toHaveText("stream a long answer");
    expect((await scrolled(page)).below, "still at the bottom").toBeLessThan(48);
});

test("each message is a heading, to move from message to message", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what time is it");
    await chat.idle();
    const log = page.getByRole("log", { name: "Conversation" });
    await expect(log.getByRole("heading", { level: 3 })).toHaveText(["You", "Assistant", "Assistant"], { ignoreCase: true });
});

test("what happened while the socket was down is said once the page is back", async ({ page }) => {
    await openOnFakeSocket(page);
    await page.evaluate(async () => {
        const w = window as any;
        w.FakeSocket.last().drop();
        await w.until(() => w.FakeSocket.sockets.length === 2, 10_000);
        const ws = w.FakeSocket.last();
        ws.accept();
        // The resume replays what the page missed: news to it.
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "me" });
        ws.push({ type: "message", seq: 1, message: { role: "user", content: "hi" } });
        ws.push({ type: "message", seq: 2, message: { role: "assistant", content: "It came **while you were away**." } });
    });
    await expect.poll(() => said(page)).toEqual([
        "Connection lost. Retrying.",
        "Connected again.",
        "Assistant: It came while you were away.",
    ]);
});
