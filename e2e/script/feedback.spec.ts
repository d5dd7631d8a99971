// What the chat page shows while a turn runs: "Thinking…" until the first
// word, Stop in place of Send, and a message sent mid-turn shown at once as
// queued until the gateway takes it. Replies from script.json next to this file.
import type { Page } from "@playwright/test";
import { expect, test, Chat, ofType } from "../support";

type Shown = { thinking: boolean; replies: number; send: boolean; stop: boolean; open: number };

/**
 * Has the page note what it shows at every change (in window.__shown): a
 * busy machine could make the test miss a state that lasts a moment.
 */
async function recordShown(page: Page) {
    await page.evaluate(() => {
        const w = window as any;
        const q = (id: string) => document.querySelector(`[data-testid="${id}"]`) as HTMLElement;
        w.__shown = [];
        new MutationObserver(() => w.__shown.push({
            thinking: !q("thinking").hidden,
            replies: document.querySelectorAll('[data-testid="message"][data-role="assistant"]').length,
            send: !q("send").hidden,
            stop: !q("stop").hidden && !(q("stop") as HTMLButtonElement).disabled,
            open: document.querySelectorAll('[data-testid="tool-card"]:not([data-status="done"]):not([data-status="error"])').length,
        })).observe(document.querySelector("[data-chat]")!, { subtree: true, childList: true, attributes: true, characterData: true });
    });
}

const shownSoFar = (page: Page): Promise<Shown[]> => page.evaluate(() => (window as any).__shown);

test("Thinking… shows from sending until the first word; Send is Stop meanwhile", async ({ page }) => {
    const chat = await Chat.open(page);
    const thinking = page.getByTestId("thinking");
    const send = page.getByRole("button", { name: "Send" });
    const stop = page.getByRole("button", { name: "Stop" });
    await expect(thinking).toBeHidden();
    await expect(send).toBeVisible();
    await recordShown(page);

    await chat.send("think first"); // its first word comes after 1.5 s
    await expect(chat.reply("Done thinking.")).toBeVisible();
    await chat.idle();
    await expect(thinking).toBeHidden();
    await expect(send).toBeVisible();
    await expect(stop).toBeHidden();

    const shown = await shownSoFar(page);
    const first = shown.findIndex((s) => s.thinking);
    expect(first, "Thinking… showed").toBeGreaterThanOrEqual(0);
    expect(shown[first]).toEqual({ thinking: true, replies: 0, send: false, stop: true, open: 0 });
    // From then until the first word: Thinking… and Stop, no reply, no Send.
    const word = shown.findIndex((s) => s.replies > 0);
    expect(word).toBeGreaterThan(first);
    for (const s of shown.slice(first, word)) expect(s).toEqual({ thinking: true, replies: 0, send: false, stop: true, open: 0 });
    // Once the word is there, Thinking… is gone for good.
    for (const s of shown.slice(word)) expect(s.thinking).toBe(false);
});

test("Thinking… shows again while the model reads its tools' results, not while they run", async ({ page }) => {
    const chat = await Chat.open(page);
    await recordShown(page);
    await chat.send("two clocks");
    await expect(chat.reply("get_local_time returned:")).toBeVisible();
    await chat.idle();
    await expect(page.getByTestId("thinking")).toBeHidden();
    const shown = await shownSoFar(page);
    // Never while a call is open...
    expect(shown.filter((s) => s.thinking && s.open > 0)).toEqual([]);
    // ...but after both settled, before the reply that words them.
    expect(shown.some((s) => s.thinking && s.open === 0 && s.replies === 1)).toBe(true);
});

test("Stop sends cancel and the turn ends as cancelled", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.recordFrames();
    await chat.send("slow stream");
    const reply = chat.reply("One");
    await expect(reply).toHaveAttribute("data-streaming", "true");
    const stop = page.getByRole("button", { name: "Stop" });
    await stop.click();

    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toBeVisible();
    await chat.idle();
    await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
    await expect(stop).toBeHidden();
    expect(ofType(await chat.sent(), "cancel")).toHaveLength(1);
    expect(ofType(await chat.events(), "model.finished").at(-1)!.stopReason).toBe("cancelled");
    await expect(reply).not.toContainText("thirty.");
});

test("a message sent mid-turn shows at once as queued, and loses the mark when the gateway takes it", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("slow stream");
    const first = chat.reply("One");
    await expect(first).toHaveAttribute("data-streaming", "true");

    // Enter still sends while the turn runs: the messages are shown at once.
    await chat.send("hello");
    await chat.send("again");
    const queued = chat.messages("user").filter({ hasText: "hello" });
    await expect(queued).toHaveAttribute("data-queued", "true");
    await expect(queued.getByTestId("message-queued")).toHaveText("Queued");
    await expect(first).toHaveAttribute("data-streaming", "true");
    // They wait at the bottom of the log, in order, while the turn goes on above them.
    await expect(chat.messages().getByTestId("message-text")).toHaveText(["slow stream", /^One two/, "hello", "again"]);
    await expect(page.locator("[data-queued=true]")).toHaveCount(2);

    // The turn ends, the gateway takes it (its message event), the mark goes.
    await expect(first).toContainText("thirty.");
    await expect(queued).not.toHaveAttribute("data-queued", /.*/);
    await expect(queued.getByTestId("message-queued")).toBeHidden();
    await expect(chat.reply("The test script has no rule for: again")).toBeVisible();
    await chat.idle();
    await expect(page.locator("[data-queued=true]")).toHaveCount(0);
    await expect(chat.messages().getByTestId("message-text")).toHaveText([
        "slow stream", /^One two/, "hello", "The test script has no rule for: hello", "again", "The test script has no rule for: again",
    ]);

    const events = await chat.events();
    const users = ofType(events, "message").filter((e) => e.message.role === "user");
    expect(users.map((e) => e.message.content)).toEqual(["slow stream", "hello", "again"]);
    // The gateway took it only after the first turn finished.
    expect(users[1].seq).toBeGreaterThan(ofType(events, "model.finished")[0].seq!);
});
