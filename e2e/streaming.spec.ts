import { expect, test, Chat, ofType } from "./support";

const LONG_ANSWER_START = "Here is a long answer, streamed a few words at a time";
const LONG_ANSWER_END = "the session goes idle, and the page lets you type again.";

test("a long answer streams in several chunks before the turn ends", async ({ page }) => {
    const chat = await Chat.open(page);
    // Record, in the page, each model.delta and each length the reply's text
    // had on screen, and when the turn finished.
    await page.evaluate(() => {
        const w = window as any;
        w.__stream = { deltas: [] as { text: string; at: number }[], lengths: [] as number[], finishedAt: 0 };
        w.gatewayClient.on("delta", ({ text }: { text: string }) => w.__stream.deltas.push({ text, at: performance.now() }));
        w.gatewayClient.on("model.finished", () => { w.__stream.finishedAt = performance.now(); });
        new MutationObserver(() => {
            const el = document.querySelector('[data-testid="message"][data-role="assistant"][data-streaming="true"] [data-testid="message-text"]');
            if (el) w.__stream.lengths.push(el.textContent!.length);
        }).observe(document.querySelector('[data-testid="messages"]')!, { subtree: true, childList: true, characterData: true });
    });

    await chat.send("stream a long answer");
    // Mid-stream: the reply is on screen, marked streaming, and incomplete.
    const reply = chat.reply(LONG_ANSWER_START);
    await expect(reply).toHaveAttribute("data-streaming", "true");
    await expect(reply).not.toContainText(LONG_ANSWER_END);

    await expect(reply).toHaveAttribute("data-streaming", "false");
    await expect(reply).toContainText(LONG_ANSWER_END);
    await chat.idle();

    const s = await page.evaluate(() => (window as any).__stream);
    expect(s.deltas.length).toBeGreaterThanOrEqual(5);
    expect(s.finishedAt).toBeGreaterThan(0);
    for (const d of s.deltas) expect(d.at).toBeLessThanOrEqual(s.finishedAt);
    // Spread over time, not one burst.
    expect(s.deltas.at(-1).at - s.deltas[0].at).toBeGreaterThan(200);
    // The text grew on screen step by step.
    expect(new Set(s.lengths).size).toBeGreaterThanOrEqual(5);

    // The deltas add up to the transcript's assistant message.
    const events = await chat.events();
    const streamed = ofType(events, "model.delta").map((e) => e.text).join("");
    const assistant = ofType(events, "message").filter((e) => e.message.role === "assistant").at(-1)!;
    expect(streamed).toBe(assistant.message.content);
    await expect(reply.getByTestId("message-text")).toHaveText(assistant.message.content);
});

test("Escape in the message box stops the streaming turn", async ({ page }) => {
    const chat = await Chat.open(page);
    const prompt = page.getByTestId("prompt");
    await prompt.fill("stream a long answer");
    await prompt.press("Enter");
    await expect(chat.reply("Here is")).toHaveAttribute("data-streaming", "true");
    await expect(prompt).toBeFocused();
    await prompt.press("Escape");
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toBeVisible();
    await chat.idle();
    expect(ofType(await chat.events(), "model.finished").at(-1)!.stopReason).toBe("cancelled");
    // Idle, Escape cancels nothing.
    await chat.recordFrames();
    await prompt.press("Escape");
    await chat.send("hello");
    await chat.idle();
    expect((await chat.sent()).map((f) => f.type)).not.toContain("cancel");
});

test("Stop cancels the streaming turn", async ({ page }) => {
    const chat = await Chat.open(page);
    // Press Stop once the first piece of text is on screen, past Stop's
    // half second of grace: a turn of 1.6 s is too short to catch reliably
    // from the test's side on a busy machine.
    await page.evaluate(() => {
        const off = (window as any).gatewayClient.on("delta", () => {
            off();
            setTimeout(() => (document.querySelector('[data-testid="stop"]') as HTMLButtonElement).click(), 600);
        });
    });
    await chat.send("stream a long answer");

    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toBeVisible();
    await chat.idle();
    await expect(page.getByTestId("stop")).toBeDisabled();
    const reply = chat.reply("Here is");
    await expect(reply).toHaveAttribute("data-streaming", "false");
    await expect(reply).not.toContainText(LONG_ANSWER_END);
    const events = await chat.events();
    expect(ofType(events, "model.finished").at(-1)!.stopReason).toBe("cancelled");
    // The transcript keeps the text streamed so far, and no more.
    const streamed = ofType(events, "model.delta").map((e) => e.text).join("");
    const assistant = ofType(events, "message").filter((e) => e.message.role === "assistant").at(-1)!;
    expect(assistant.message.content).toBe(streamed);
    // Cut before its end: how far it got depends on the machine's load.
    expect(streamed).toMatch(/^Here is/);
    expect(streamed).not.toContain(LONG_ANSWER_END);
});

test("a double-click on Send sends the message once and does not stop it", async ({ page }) => {
    const chat = await Chat.open(page);
    await page.getByTestId("prompt").fill("what time is it");
    await page.getByTestId("send").dblclick();
    await chat.idle();
    await expect(chat.messages("user")).toHaveCount(1);
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toHaveCount(0);
    await expect(chat.messages("assistant").last()).toContainText(/\d/);
    const events = await chat.events();
    expect(ofType(events, "model.finished").map((e) => e.stopReason)).not.toContain("cancelled");
});
