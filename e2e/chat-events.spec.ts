// The chat page's answers to what the gateway says about the session
// itself: a reply discarded by a restart, a message the store refused. The
// page's socket is the fake of sdk.spec.ts: the spec plays the gateway.
import { expect, fakeChatTest, openOnFakeSocket, scrolled } from "./support";

fakeChatTest.beforeEach(({ page }) => openOnFakeSocket(page));

const push = (page: any, frame: any) => page.evaluate((f: any) => (window as any).FakeSocket.last().push(f), frame);

// reopened plays the gateway for the page's second socket, once the SDK
// reconnects: the session opens at seq, and the first frame of type the
// page sends on it comes back.
const reopened = (page: any, seq: number, type: string) => page.evaluate(async ({ seq, type }: any) => {
    const w = window as any;
    await w.until(() => w.FakeSocket.sockets.length === 2, 15_000);
    const ws = w.FakeSocket.last();
    ws.accept();
    ws.push({ type: "session.opened", session: "s1", seq, page: "me" });
    await w.until(() => ws.sent.some((f: any) => f.type === type));
    return ws.sent.find((f: any) => f.type === type);
}, { seq, type });

fakeChatTest("a reply cut by a restart is dropped, and the new one streams in its place", async ({ page }) => {
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await push(page, { type: "model.delta", seq: 2, text: "Hel" });
    await push(page, { type: "model.delta", seq: 3, text: "lo, wo" });
    const replies = page.locator('[data-testid="message"][data-role="assistant"]');
    await expect(replies).toHaveCount(1);
    await expect(replies.getByTestId("message-text")).toHaveText("Hello, wo");
    await push(page, { type: "model.discarded", seq: 4, reason: "the gateway restarted while the model was answering; it answers again" });
    await expect(replies).toHaveCount(0);
    await push(page, { type: "model.delta", seq: 5, text: "Hello, world." });
    await push(page, { type: "model.finished", seq: 6, stopReason: "end_turn", usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "message", seq: 7, message: { role: "assistant", content: "Hello, world." } });
    await push(page, { type: "session.idle", seq: 8 });
    await expect(replies).toHaveCount(1);
    await expect(replies.getByTestId("message-text")).toHaveText("Hello, world.");
});

fakeChatTest("a message the store refused says so, and its text is given back", async ({ page }) => {
    const prompt = page.getByTestId("prompt");
    await prompt.fill("remember this");
    await prompt.press("Enter");
    await expect(prompt).toHaveValue("");
    await expect.poll(() => page.evaluate(() => (window as any).FakeSocket.last().sent.slice(1)))
        .toEqual([{ type: "message", content: "remember this", id: expect.any(String) }]);
    await push(page, { type: "error", code: "store_unavailable", message: "the session store is unavailable: no space left on device" });
    await expect(page.getByTestId("notice-text").last()).toHaveText("Your message was not sent: the session store is unavailable: no space left on device");
    await expect(prompt).toHaveValue("remember this");
    await expect(page.getByTestId("stop")).toBeDisabled();
});

fakeChatTest("offline, a message waits as Queued with no Thinking, and goes once the page is back", async ({ page }) => {
    await page.evaluate(() => (window as any).FakeSocket.last().drop());
    const status = page.getByTestId("connection-status");
    await expect(status).toHaveAttribute("data-state", /^(closed|connecting)$/);
    const prompt = page.getByTestId("prompt");
    await prompt.fill("sent while offline");
    await prompt.press("Enter");
    await expect(page.locator("[data-queued=true]").getByTestId("message-queued")).toBeVisible();
    await expect(page.getByTestId("thinking")).toBeHidden();
    const sent = await reopened(page, 0, "message");
    expect(sent).toMatchObject({ type: "message", content: "sent while offline" });
    await expect(page.getByTestId("thinking")).toBeVisible();
});

fakeChatTest("the offline status counts down to the next try", async ({ page }) => {
    await page.evaluate(() => {
        const w = window as any;
        w.gatewayClient.on("state", (d: any) => { if (d.retryIn !== undefined) w.__retryIn = d.retryIn; });
        // The next tries are far: the countdown has seconds to show.
        w.FakeSocket.prototype.accept = function () { /* the gateway never answers */ };
    });
    for (let i = 0; i < 6; i++) {
        await page.evaluate(() => (window as any).FakeSocket.last().drop());
        const retryIn = await page.evaluate(() => (window as any).__retryIn);
        if (retryIn >= 3000) break;
        await page.waitForFunction((n) => (window as any).FakeSocket.sockets.length > n, i + 1);
    }
    const status = page.getByTestId("connection-status");
    const seconds = async () => Number((await status.textContent())?.match(/retrying in (\d+)s/)?.[1] ?? NaN);
    const first = await seconds();
    expect(first).toBeGreaterThan(1);
    // Fewer seconds within two and a half: a busy machine's timer may
    // skip a second's text (7s, then 5s), so any fewer counts.
    await expect.poll(seconds, { timeout: 2500 }).toBeLessThan(first);
    expect(await seconds()).toBeGreaterThanOrEqual(first - 3);
});

fakeChatTest("a chat the gateway will not open says so once, however many tries", async ({ page }) => {
    const refuse = (n: number) => page.evaluate(async (n) => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === n, 15_000);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "error", code: "internal", message: "failed to load session s1: nats: timeout" });
    }, n);
    await page.evaluate(() => (window as any).FakeSocket.last().drop());
    await refuse(2);
    await refuse(3);
    await expect(page.getByTestId("notice-text")).toHaveText(["The chat could not be opened: failed to load session s1: nats: timeout"]);
    await expect(page.getByTestId("connection-status")).not.toHaveAttribute("data-state", "open");
});

fakeChatTest("a refusal whose text counts down is said once", async ({ page }) => {
    const refuse = (n: number, message: string) => page.evaluate(async ({ n, message }) => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === n, 15_000);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "error", code: "rate_limited", message });
    }, { n, message });
    await page.evaluate(() => (window as any).FakeSocket.last().drop());
    await refuse(2, "this browser opened 30 sessions in the last minute, the most it may: try again in 2s");
    await refuse(3, "this browser opened 30 sessions in the last minute, the most it may: try again in 1s");
    await expect(page.getByTestId("notice-text")).toHaveText(["The chat could not be opened: this browser opened 30 sessions in the last minute, the most it may: try again in 2s"]);
});

fakeChatTest("a chat the gateway cannot read: a new chat opens on the same socket, and the page says why", async ({ page }) => {
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await expect(page.getByTestId("message")).toHaveCount(1);
    const sent = await page.evaluate(async () => {
        const w = window as any;
        w.FakeSocket.last().drop();
        await w.until(() => w.FakeSocket.sockets.length === 2, 15_000);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "error", code: "session_unreadable", message: 'session "s1" cannot be opened: session journal is unreadable: session s1, message 7: unexpected end of JSON input' });
        await w.until(() => ws.sent.length === 2);
        ws.push({ type: "session.opened", session: "s2", seq: 0, page: "me" });
        return ws.sent.map((f: any) => ({ session: f.session, after: f.after }));
    });
    expect(sent).toEqual([{ session: "s1", after: 1 }, { session: undefined, after: undefined }]);
    await expect(page.getByTestId("notice-text")).toHaveText(["That chat could not be opened: the gateway cannot read what it stored of it. This is a new chat."]);
    await expect(page.getByTestId("message"), "the old chat's copy is gone").toHaveCount(0);
    await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");
    expect(await page.evaluate(() => (window as any).FakeSocket.sockets.length), "no other socket").toBe(2);
});

fakeChatTest("an approval given offline says it goes once the page is back, and goes then", async ({ page }) => {
    await push(page, { type: "tool.approval", seq: 1, id: "c1", name: "delete_file", arguments: '{"path":"notes.txt"}', digest: "d1", handler: "worker" });
    const card = page.locator('[data-testid="tool-card"][data-tool-id="c1"]');
    await expect(card.getByTestId("tool-approval")).toBeVisible();
    await page.evaluate(() => (window as any).FakeSocket.last().drop());
    await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", /^(closed|connecting)$/);
    await card.getByTestId("approve").click();
    await expect(card.getByTestId("approval-held")).toHaveText("Approved: it is sent once the page is back online.");
    await expect(card.getByTestId("deny")).toBeEnabled(); // a later answer replaces it
    const sent = await reopened(page, 1, "tool.approve");
    expect(sent).toEqual({ type: "tool.approve", id: "c1", digest: "d1", approved: true });
    // Online again, the answer that went stands: a Deny now is not sent,
    // nor said to go later.
    await card.getByTestId("deny").click();
    await expect(card.getByTestId("deny")).toBeDisabled();
    await expect(card.getByTestId("approval-held")).toHaveCount(0);
    const approves = await page.evaluate(() => (window as any).FakeSocket.last().sent.filter((f: any) => f.type === "tool.approve"));
    expect(approves).toHaveLength(1);
});

const started = (seq: number, id: string) => ({ type: "tool.started", seq, id, name: "lookup", arguments: "{}", input: { status: "valid", value: {} }, handler: "worker", attempt: 1, attempts: 1, deadline: "2026-01-01T00:00:00Z" });
const cancelled = (seq: number, id: string, why: string) => ({ type: "tool.finished", seq, id, ok: false, name: "lookup", error: `lookup was cancelled: ${why}.`, code: "cancelled" });

fakeChatTest("calls the session's end cancelled say it ended, not Stopped.", async ({ page }) => {
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "look it up" } });
    await push(page, started(2, "c1"));
    await push(page, cancelled(3, "c1", "the session ended"));
    await push(page, { type: "session.ended", seq: 4 });
    await expect(page.getByTestId("notice").filter({ hasText: "The conversation ended." })).toBeVisible();
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toHaveCount(0);
});

fakeChatTest("a Stop at the calls of each turn is said, a turn no message started too", async ({ page }) => {
    const stopped = page.getByTestId("notice").filter({ hasText: "Stopped." });
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "look it up" } });
    await push(page, started(2, "c1"));
    await push(page, cancelled(3, "c1", "cancelled by the user"));
    await push(page, { type: "session.idle", seq: 4 });
    await expect(stopped).toHaveCount(1);
    // A trigger's turn: no user message.
    await push(page, started(5, "c2"));
    await push(page, cancelled(6, "c2", "cancelled by the user"));
    await push(page, { type: "session.idle", seq: 7 });
    await expect(stopped).toHaveCount(2);
});

fakeChatTest("a turn the model declined, or a filter withheld, with no text says so; one with text does not", async ({ page }) => {
    const notices = page.getByTestId("notice-text");
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await push(page, { type: "model.finished", seq: 2, stopReason: "refusal", usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "session.idle", seq: 3 });
    await expect(notices.last()).toHaveText("The model declined to answer.");
    await push(page, { type: "message", seq: 4, message: { role: "user", content: "again" } });
    await push(page, { type: "model.finished", seq: 5, stopReason: "content_filter", usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "session.idle", seq: 6 });
    await expect(notices.last()).toHaveText("The provider's content filter withheld the reply.");
    await push(page, { type: "message", seq: 7, message: { role: "user", content: "once more" } });
    await push(page, { type: "model.delta", seq: 8, text: "I can't help with that." });
    await push(page, { type: "model.finished", seq: 9, stopReason: "refusal", usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "message", seq: 10, message: { role: "assistant", content: "I can't help with that." } });
    await push(page, { type: "session.idle", seq: 11 });
    await expect(page.locator('[data-testid="message"][data-role="assistant"]').getByTestId("message-text")).toHaveText("I can't help with that.");
    await expect(notices).toHaveCount(2);
});

fakeChatTest("while the model's request waits to go again, Thinking says why; the reply puts it back", async ({ page }) => {
    const thinking = page.getByTestId("thinking");
    const words = page.getByTestId("thinking-text");
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await expect(thinking).toBeVisible();
    await expect(words).toHaveText("Thinking…");
    await push(page, { type: "model.retrying", seq: 2, attempt: 1, attempts: 4, error: "anthropic: status 529: Overloaded", backoff: "1.5s" });
    await expect(words).toHaveText("The model's provider is busy: trying again (attempt 2 of 4)…");
    await expect(page.getByTestId("announcer")).toContainText("The model's provider is busy: trying again (attempt 2 of 4)…");
    await push(page, { type: "model.retrying", seq: 3, attempt: 2, attempts: 4, error: "anthropic: status 429: Number of requests has exceeded your rate limit", backoff: "7s" });
    await expect(words).toHaveText("The model's provider is rate limiting the gateway: trying again (attempt 3 of 4)…");
    await push(page, { type: "model.delta", seq: 4, text: "Hello." });
    await expect(thinking).toBeHidden();
    await push(page, { type: "model.finished", seq: 5, stopReason: "end_turn", usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "message", seq: 6, message: { role: "assistant", content: "Hello." } });
    await push(page, { type: "session.idle", seq: 7 });
    await push(page, { type: "message", seq: 8, message: { role: "user", content: "again" } });
    await expect(thinking).toBeVisible();
    await expect(words).toHaveText("Thinking…");
    await push(page, { type: "model.retrying", seq: 9, attempt: 1, attempts: 4, error: "anthropic: stream cut off mid-turn: Overloaded", backoff: "600ms" });
    await expect(words).toHaveText("The model's provider is busy: trying again (attempt 2 of 4)…");
    await push(page, { type: "model.retrying", seq: 10, attempt: 2, attempts: 4, error: "openai: stream cut off mid-turn: unexpected EOF", backoff: "1.2s" });
    await expect(words).toHaveText("The model could not be reached: trying again (attempt 3 of 4)…");
});

// switchTo opens s2 from the page (as the list of chats does) and plays the
// gateway for its socket, opened at seq; pushAll pushes frames in one task.
const switchTo = (page: any, seq: number) => page.evaluate(async (seq: number) => {
    const w = window as any;
    w.gatewayClient.open("s2");
    await w.until(() => w.FakeSocket.sockets.length === 2, 15_000);
    w.FakeSocket.last().accept();
    w.FakeSocket.last().push({ type: "session.opened", session: "s2", seq, page: "me" });
}, seq);
const pushAll = (page: any, frames: any[]) => page.evaluate((fs: any[]) => fs.forEach((f) => (window as any).FakeSocket.last().push(f)), frames);
// s2's 40 turns, a message and its reply each, longer than the window.
const turns = Array.from({ length: 40 }, (_, n) => [
    { type: "message", seq: 3 * n + 1, message: { role: "user", content: `question ${n}` } },
    { type: "message", seq: 3 * n + 2, message: { role: "assistant", content: `Answer ${n}: a reply of a few words, so that forty of them fill more than the window.` } },
    { type: "session.idle", seq: 3 * n + 3 },
]).flat();

fakeChatTest("a chat switched to shows once its replay is in, whole and at its bottom", async ({ page }) => {
    const list = page.getByTestId("message-list");
    const messages = page.getByTestId("message");
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "the chat before" } });
    await expect(list).toBeVisible();
    await switchTo(page, turns.length);
    await pushAll(page, turns.slice(0, -1));
    // All but its last event in: hidden (it is laid out once, not at each frame), and not empty either.
    await expect(messages).toHaveCount(80);
    await expect(list).toBeHidden();
    await expect(page.getByTestId("empty-chat")).toBeHidden();
    // It says it loads, and is busy to screen readers, until it shows.
    const log = page.getByTestId("messages");
    await expect(log).toHaveAttribute("aria-busy", "true");
    await expect(page.locator("[data-chat]")).toHaveAttribute("data-loading", "true");
    expect(await log.evaluate((el) => getComputedStyle(el, "::before").content)).toContain("Loading this chat");
    await pushAll(page, turns.slice(-1));
    await expect(list).toBeVisible();
    await expect(log).not.toHaveAttribute("aria-busy");
    await expect(page.locator("[data-chat]")).not.toHaveAttribute("data-loading");
    await expect(messages.last()).toBeInViewport();
    await expect.poll(async () => (await scrolled(page)).below).toBeLessThan(48);
});

fakeChatTest("a chat switched to whose connection is lost on the way shows what came", async ({ page }) => {
    const list = page.getByTestId("message-list");
    await switchTo(page, turns.length);
    await pushAll(page, turns.slice(0, 30));
    await expect(list).toBeHidden();
    await page.evaluate(() => (window as any).FakeSocket.last().drop());
    await expect(list).toBeVisible();
    await expect(page.getByTestId("message")).toHaveCount(20);
    await expect.poll(async () => (await scrolled(page)).below).toBeLessThan(48);
});
