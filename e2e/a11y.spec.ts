// axe-core scans the chat page in each of its states: no finding, of any
// impact. A finding fails the test with its rule, its elements and why.
import axe from "axe-core";
import type { Page } from "@playwright/test";
import { expect, test, Chat, installFakeSocket } from "./support";

// A scan takes a few seconds on a busy two-core machine, and each test scans several states.
test.describe.configure({ timeout: 90_000 });

/**
 * Scans page in the light scheme and then the dark one, in the state it is
 * in: what a state shows is the same in both, and driving the page there
 * once for both schemes halves the suite's a11y time.
 */
async function scan(page: Page, state: string) {
    expect(await findings(page), state).toEqual([]);
    await page.emulateMedia({ colorScheme: "dark" });
    expect(await findings(page), `${state}, in the dark scheme`).toEqual([]);
    await page.emulateMedia({ colorScheme: "light" });
}

/**
 * The findings of a scan of page, for reading. In the dark scheme the rules
 * of colour alone: the others read the page's structure (names, roles,
 * ARIA), which the scheme does not change, and the light scheme's scans
 * check it; the whole set took most of the suite's a11y time twice over.
 * axe-core goes into the page once and runs there (the page has no frames):
 * AxeBuilder's analyze put its source in again at each scan and finished
 * the run in a new page, a second a scan where axe's run takes a tenth.
 */
async function findings(page: Page): Promise<string[]> {
    const dark = await page.evaluate(() => matchMedia("(prefers-color-scheme: dark)").matches);
    if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(axe.source);
    const violations: axe.Result[] = await page.evaluate(async (rules) => {
        const options: axe.RunOptions = { resultTypes: ["violations"] };
        if (rules) options.runOnly = { type: "rule", values: rules };
        return (await (window as any).axe.run(document, options)).violations;
    }, dark ? ["color-contrast", "link-in-text-block"] : null);
    return violations
        .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}) ${n.target.join(" ")}: ${n.failureSummary?.replace(/\s+/g, " ")}`));
}

// Streaming is scanned on the fake socket below, where the stream
// waits for the scan instead of racing it.
test("empty, tool cards folded and unfolded, a confirm waiting, the chat list", async ({ page }) => {
    const chat = await Chat.open(page);
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    await expect(page.getByTestId("history-empty")).toBeVisible();
    await scan(page, "empty: the suggestions, no chats yet");

    await chat.send("what's the weather in Tokyo");
    await expect(chat.cards("get_weather")).toHaveAttribute("data-status", "done");
    await chat.idle();
    await chat.send("test invalid");
    await expect(chat.cards("get_weather").last()).toHaveAttribute("data-status", "error");
    await chat.idle();
    await scan(page, "tool cards, folded");
    for (const card of await chat.cards().all()) await card.locator("summary").first().click();
    await chat.cards().locator('[data-testid="tool-transcript"] summary').first().click();
    await scan(page, "tool cards, unfolded");

    await chat.send("delete my draft");
    await expect(chat.cards("confirm").getByTestId("confirm-approve")).toBeVisible();
    await scan(page, "a confirm waiting");
    await chat.cards("confirm").getByTestId("confirm-deny").click();
    await chat.idle();
    await scan(page, "a confirm answered");

    await chat.send("test approval");
    await expect(chat.cards("delete_file").getByTestId("approve")).toBeVisible();
    await scan(page, "the approval gate waiting");
    await chat.cards("delete_file").getByTestId("deny").click();
    await chat.idle();

    // New chat: the list of chats, one of them current, and the
    // empty screen with its suggestions; then the list with the
    // chat shown marked.
    await page.getByTestId("new-chat").click();
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    await expect(page.getByTestId("history-item")).toHaveCount(1);
    await chat.connected();
    await scan(page, "the chat list, the empty screen");
    await page.getByTestId("history-item").click();
    await expect(page.getByTestId("history-item")).toHaveAttribute("aria-current", "true");
    await expect(chat.cards("confirm")).toHaveAttribute("data-status", "done");
    await scan(page, "the chat list, the chat shown marked");
});

test("thinking, streaming Markdown, a queued message, an error with Retry, notices", async ({ page }) => {
    await installFakeSocket(page, { replaceWebSocket: true });
    await page.goto("/");
    const push = (f: any) => page.evaluate((f) => (window as any).FakeSocket.last().push(f), f);
    await page.evaluate(async () => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === 1);
        w.FakeSocket.last().accept();
    });
    await push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
    await push({ type: "message", seq: 1, message: { role: "user", content: "hi" } });
    await expect(page.getByTestId("thinking")).toBeVisible();
    await scan(page, "thinking");
    await push({ type: "model.delta", seq: 2, text: "Some **bold** text and `code`:\n\n```js\nlet x = 1;\n```\n\n| a | b |\n| - | - |\n| 1 | 2 |\n\n[a link](https://example.com)" });
    const prompt = page.getByTestId("prompt");
    await prompt.fill("and then?");
    await prompt.press("Enter");
    await expect(page.locator("[data-queued=true]").getByTestId("message-queued")).toBeVisible();
    await expect(page.getByTestId("thinking")).toBeHidden();
    await expect(page.locator('[data-role="assistant"]')).toHaveAttribute("data-streaming", "true");
    await scan(page, "streaming Markdown, a queued message");

    await push({ type: "model.finished", seq: 3, stopReason: "error", error: "anthropic: status 529: Overloaded", usage: {} });
    await push({ type: "error", seq: 4, code: "model_failed", message: "anthropic: status 529: Overloaded" });
    await push({ type: "guard.tripped", seq: 5, guard: "model_turns", limit: 25, value: 25, message: "Stopped: the model took 25 turns to answer one message, the limit." });
    await push({ type: "client.event", seq: 6, name: "progress", data: { step: 1 } });
    await push({ type: "session.idle", seq: 7 });
    await expect(page.getByRole("button", { name: "Retry" })).toBeVisible();
    await scan(page, "an error with Retry, a guard, an event");
});

test("the dark theme the set_theme tool picks", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("switch to dark theme");
    await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
    await chat.idle();
    await chat.send("delete my draft");
    await expect(chat.cards("confirm").getByTestId("confirm-approve")).toBeVisible();
    expect(await findings(page), "dark theme").toEqual([]);
});
