// A model failure is said once, in words, with a Retry button; the gateway's
// own text (resolver addresses, URLs) goes to the console only. The page's
// socket is the fake of sdk.spec.ts: the spec plays a gateway whose model fails.
import type { ConsoleMessage } from "@playwright/test";
import { expect, fakeChatTest, openOnFakeSocket } from "./support";

const push = (page: any, frame: any) => page.evaluate((f: any) => (window as any).FakeSocket.last().push(f), frame);
const sent = (page: any) => page.evaluate(() => (window as any).FakeSocket.last().sent.slice(1));

fakeChatTest.beforeEach(({ page }) => openOnFakeSocket(page));

/** A turn on "hi" whose model fails with error, as the gateway reports it: model.finished, then error. */
async function failingTurn(page: any, error: string, seq = 1) {
    await push(page, { type: "message", seq, message: { role: "user", content: "hi" } });
    await push(page, { type: "model.finished", seq: seq + 1, stopReason: "error", error, usage: { inputTokens: 0, outputTokens: 0 } });
    await push(page, { type: "error", seq: seq + 2, code: "model_failed", message: error });
    await push(page, { type: "session.idle", seq: seq + 3 });
}

fakeChatTest("a model that cannot be reached is said once, without the network's details, and Retry sends the message again", async ({ page }) => {
    const warnings: string[] = [];
    const warned = (m: ConsoleMessage) => { if (m.type() === "warning") warnings.push(m.text()); };
    page.on("console", warned);
    const raw = 'openai: Post "https://api.openai.com/v1/chat/completions": dial tcp: lookup api.openai.com on 10.96.0.10:53: no such host';
    await failingTurn(page, raw);

    const notices = page.getByTestId("notice");
    await expect(notices).toHaveCount(1);
    await expect(notices).toHaveAttribute("data-kind", "error");
    await expect(notices.getByTestId("notice-text")).toHaveText("The model could not be reached.");
    const body = await page.locator("body").innerText();
    for (const leak of ["10.96.0.10", "lookup", "dial tcp", "https://"]) expect(body).not.toContain(leak);
    // The details are for whoever opens the console.
    expect(warnings.some((w) => w.includes("10.96.0.10:53"))).toBe(true);
    page.off("console", warned); // the page is the next spec's too
    await expect(page.locator("[data-chat]")).toHaveAttribute("data-busy", "false");

    const retry = notices.getByRole("button", { name: "Retry" });
    await retry.click();
    await expect.poll(() => sent(page)).toEqual([{ type: "message", content: "hi", id: expect.any(String) }]);
    await expect(page.getByRole("button", { name: "Stop" })).toBeVisible();
    // The gateway takes it: the old error's Retry is over.
    await push(page, { type: "message", seq: 5, message: { role: "user", content: "hi" } });
    await expect(retry).toBeDisabled();
    await expect(page.getByTestId("message").and(page.locator('[data-role="user"]'))).toHaveCount(2);
});

for (const { raw, said } of [
    { raw: "anthropic: status 529: Overloaded", said: "The model's provider is having trouble: Overloaded." },
    { raw: "openai: status 429: Rate limit reached for gpt-x in organization org-123 on tokens per min.", said: "The model's provider is rate limiting the gateway. Try again in a moment." },
    { raw: "anthropic: status 401: invalid x-api-key", said: "The model's provider refused the gateway's key." },
    { raw: "anthropic: status 400: messages.1.content: " + "x".repeat(300), said: /^The model failed: messages\.1\.content: x+…$/ },
    { raw: "anthropic: stream cut off mid-turn: unexpected EOF", said: "The model could not be reached." },
    // A streamed error has no status: its words say the provider is busy, not the network.
    { raw: "anthropic: stream cut off mid-turn: Overloaded", said: "The model's provider is having trouble: Overloaded." },
    // An index in brackets is the provider's words, not an address.
    { raw: "openai: status 400: Invalid 'messages[3].content': too long. See https://10.0.0.5:8443/debug", said: "The model failed: Invalid 'messages[3].content': too long. See." },
    { raw: "openai: request body: field tools[12] is not valid", said: "The model failed: request body: field tools[12] is not valid." },
    { raw: "openai: dial tcp [2001:db8::1]:443: connect: connection refused", said: "The model could not be reached." },
    { raw: "openai: status 400: the endpoint [2001:db8::1]:443 refused the request", said: "The model failed: the endpoint refused the request." },
]) {
    fakeChatTest(`a provider's failure in words: ${raw.slice(0, 40)}`, async ({ page }) => {
        await failingTurn(page, raw);
        const text = page.getByTestId("notice-text");
        await expect(text).toHaveCount(1);
        await expect(text).toHaveText(said);
        expect((await text.textContent())!.length).toBeLessThanOrEqual(140);
    });
}

fakeChatTest("a chat longer than the model reads says to start a new chat, and offers no Retry, which would fail the same way", async ({ page }) => {
    const raw = "openai: status 400: the chat is longer than the model can read: start a new chat (This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.)";
    await failingTurn(page, raw);
    await expect(page.getByTestId("notice-text")).toHaveText(["This chat is longer than the model can read: start a new chat."]);
    await expect(page.getByTestId("notice").getByRole("button", { name: "Retry" })).toBeHidden();
    // Another failure still offers it.
    await failingTurn(page, "anthropic: status 529: Overloaded", 5);
    await expect(page.getByTestId("notice").last().getByRole("button", { name: "Retry" })).toBeVisible();
});

fakeChatTest("a worker failure is said once, in words", async ({ page }) => {
    await push(page, { type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await push(page, { type: "error", seq: 2, code: "worker_failed", message: "worker: Post \"http://10.0.0.7:8080/hook\": connection refused" });
    await push(page, { type: "session.idle", seq: 3 });
    await expect(page.getByTestId("notice-text")).toHaveText(["The agent's worker failed on the last step."]);
    expect(await page.locator("body").innerText()).not.toContain("10.0.0.7");
});
