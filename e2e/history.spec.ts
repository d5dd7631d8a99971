// The chat history beside the conversation: this browser's chats from GET
// /sessions, newest first, by title; switching resumes the other chat; New
// chat shows the empty screen with the demo's suggestions, and a click on one
// sends it.
import { expect, test, Chat } from "./support";

const WEATHER = "what's the weather in Tokyo";
const TIME = "what time is it";

test("two chats: the list shows both newest first, switching shows the other's messages, New chat the suggestions", async ({ page }) => {
    const chat = await Chat.open(page);
    const history = page.getByRole("navigation", { name: "Chats" });
    const items = history.getByTestId("history-item");
    const empty = page.getByTestId("empty-chat");
    const suggestions = empty.getByTestId("suggestion");

    // A new browser: no chats yet, and an empty chat offers the suggestions.
    await expect(history.getByTestId("history-empty")).toHaveText("No chats yet.");
    await expect(empty).toBeVisible();
    await expect(suggestions).toHaveText([WEATHER, TIME, "switch to dark theme", "delete my draft"]);

    // The first chat: its first message is its title, listed as soon as it is said.
    await chat.send(WEATHER);
    await expect(empty).toBeHidden();
    await expect(items).toHaveText([WEATHER]);
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();
    const first = await chat.session();
    await expect(items.first()).toHaveAttribute("aria-current", "true");
    await expect(items.first()).toHaveAttribute("data-session", first);

    // New chat: the empty screen, nothing current; a suggestion sends itself.
    await history.getByRole("button", { name: "New chat" }).click();
    await expect(chat.messages()).toHaveCount(0);
    await expect(empty).toBeVisible();
    await expect(page.getByTestId("prompt")).toBeFocused();
    await expect(items.and(page.locator("[aria-current]"))).toHaveCount(0);
    await chat.connected();
    await suggestions.filter({ hasText: TIME }).click();
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText([TIME]);
    await expect(empty).toBeHidden();
    await expect(chat.reply("Your page says it's")).toBeVisible();
    await chat.idle();
    const second = await chat.session();
    expect(second).not.toBe(first);

    // Newest first, the chat shown marked.
    await expect(items).toHaveText([TIME, WEATHER]);
    await expect(items.nth(0)).toHaveAttribute("aria-current", "true");
    await expect(items.nth(1)).not.toHaveAttribute("aria-current");

    // Switching resumes the first chat: its messages, and only its.
    await items.filter({ hasText: WEATHER }).click();
    await expect.poll(() => chat.session()).toBe(first);
    await chat.connected();
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText([WEATHER]);
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toHaveCount(1);
    await expect(chat.cards("get_weather")).toHaveAttribute("data-status", "done");
    await expect(chat.cards("get_local_time")).toHaveCount(0);
    await expect(empty).toBeHidden();
    await expect(items.filter({ hasText: WEATHER })).toHaveAttribute("aria-current", "true");
    // Switching does not reorder: the order is the last message's.
    await expect(items).toHaveText([TIME, WEATHER]);

    // The resumed chat goes on, and moves to the top.
    await chat.send("what's the weather in San Francisco");
    await expect(chat.reply("get_weather returned: It's foggy in San Francisco.")).toBeVisible();
    await chat.idle();
    await expect(items).toHaveText([WEATHER, TIME]);

    // And back: the second chat, as it was.
    await items.filter({ hasText: TIME }).click();
    await expect.poll(() => chat.session()).toBe(second);
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText([TIME]);
    await expect(chat.reply("Your page says it's")).toHaveCount(1);

    // A reload keeps the chat this tab shows, and the list.
    await page.reload();
    await chat.connected();
    expect(await chat.session()).toBe(second);
    await expect(items).toHaveText([WEATHER, TIME]);
    await expect(items.filter({ hasText: TIME })).toHaveAttribute("aria-current", "true");
});

test("an empty chat that is being switched to does not flash the suggestions", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send(WEATHER);
    await chat.idle();
    await page.getByTestId("new-chat").click();
    await chat.connected();
    // Record every time the empty screen shows while the first chat is opened.
    await page.evaluate(() => {
        const w = window as any;
        const screen = document.querySelector("[data-testid=empty-chat]") as HTMLElement;
        w.__shown = 0;
        new MutationObserver(() => { if (!screen.hidden) w.__shown++; }).observe(screen, { attributes: true, attributeFilter: ["hidden"] });
    });
    await page.getByTestId("history-item").filter({ hasText: WEATHER }).click();
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.connected();
    expect(await page.evaluate(() => (window as any).__shown)).toBe(0);
    await expect(page.getByTestId("empty-chat")).toBeHidden();
});

test("a long title shows two lines and no part of a third", async ({ page }) => {
    const chat = await Chat.open(page);
    const title = "please tell me a long story about the weather in Tokyo and Osaka and Kyoto and Nara in the spring";
    await chat.send(title);
    const item = page.getByRole("navigation", { name: "Chats" }).getByTestId("history-item");
    await expect(item).toHaveAttribute("title", title.slice(0, 79).trim() + "…");
    // Each line of the text that starts below the button's clip (its
    // padding box, where overflow is cut) shows nothing of itself. Measured
    // again if the list was rebuilt under the measure (a refresh at the
    // turn's end): a button taken off the page has no lines.
    await expect(async () => {
        const shown = await item.evaluate((b) => {
            const box = b.getBoundingClientRect();
            const clip = box.bottom - parseFloat(getComputedStyle(b).borderBottomWidth);
            const range = document.createRange();
            range.selectNodeContents(b);
            const tops = [...new Set([...range.getClientRects()].map((r) => Math.round(r.top)))].sort((x, y) => x - y);
            return { lines: tops.length, third: tops.length > 2 ? clip - tops[2] : 0 };
        });
        expect(shown.lines).toBeGreaterThan(2); // the title needs more than two lines here
        expect(shown.third).toBeLessThanOrEqual(0.5);
    }).toPass();
});

test("a chat deleted from the list is gone, here and in the tab that shows it; the chat shown, deleted, gives way to a new one", async ({ page, context }) => {
    const chat = await Chat.open(page);
    const items = page.getByRole("navigation", { name: "Chats" }).getByTestId("history-item");
    await chat.send(WEATHER);
    await chat.idle();
    const first = await chat.session();
    await page.getByTestId("new-chat").click();
    await chat.connected();
    await chat.send(TIME);
    await chat.idle();
    const second = await chat.session();
    await expect(items).toHaveText([TIME, WEATHER]);

    // Another tab shows the first chat.
    const other = new Chat(await context.newPage());
    await Chat.join(other.page, first);

    // Cancelled at the question, nothing is deleted.
    page.once("dialog", (d) => d.dismiss());
    await page.getByRole("button", { name: `Delete the chat ${WEATHER}` }).click();
    await expect(items).toHaveText([TIME, WEATHER]);

    // Confirmed: gone from the list, and the other tab says so, its box closed.
    let asked = "";
    page.once("dialog", (d) => { asked = d.message(); void d.accept(); });
    await page.getByRole("button", { name: `Delete the chat ${WEATHER}` }).click();
    await expect(items).toHaveText([TIME]);
    expect(asked).toBe(`Delete the chat "${WEATHER}"? It cannot be brought back.`);
    await expect(other.page.getByTestId("notice-text").last()).toHaveText("This chat was deleted. Start a new chat to go on.");
    await expect(other.page.getByTestId("prompt")).toBeDisabled();
    await expect(other.page.getByTestId("history-item"), "the other tab's list follows").toHaveText([TIME]);
    // A list asked for between the chat's end and its purge has it still,
    // ended: it is not shown.
    await other.page.route("**/sessions", (route) => route.fulfill({ json: { sessions: [
        { id: second, title: TIME, created: "", updated: "" },
        { id: first, title: WEATHER, created: "", updated: "", ended: true },
    ] } }));
    await other.page.evaluate(() => (window as any).chatHistory.refresh(true));
    await expect(other.page.getByTestId("history-item"), "a deleted chat a late list has").toHaveText([TIME]);
    await other.page.unroute("**/sessions");
    await expect(page.getByRole("button", { name: `Delete the chat ${TIME}` }), "the focus stays in the list").toBeFocused();
    expect(await chat.session(), "the chat shown stays").toBe(second);
    // The list is asked for again now and then (a turn ended, a title came):
    // the focus stays on the ×.
    await page.evaluate(() => (window as any).chatHistory.refresh());
    await expect(page.getByRole("button", { name: `Delete the chat ${TIME}` }), "the focus stays through a refresh").toBeFocused();

    // The chat shown, deleted: a new chat takes its place, the prompt focused.
    page.once("dialog", (d) => d.accept());
    await page.getByRole("button", { name: `Delete the chat ${TIME}` }).click();
    await expect(page.getByTestId("history-empty")).toBeVisible();
    await expect.poll(() => chat.session()).not.toBe(second);
    await chat.connected();
    await expect(chat.messages()).toHaveCount(0);
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    await expect(page.getByTestId("prompt")).toBeFocused();

    // Neither comes back: not in the list after a reload, not by its id.
    const list = await (await page.request.get("/sessions")).json();
    expect(list.sessions.map((s: { id: string }) => s.id)).not.toContain(first);
    expect(list.sessions.map((s: { id: string }) => s.id)).not.toContain(second);
    const again = await page.request.delete(`/sessions/${first}`);
    expect(again.status()).toBe(404);
});
