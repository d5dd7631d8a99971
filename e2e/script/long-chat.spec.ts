// A chat longer than the events a session keeps in memory for replays
// (64 KiB): a reload, and another tab, get the older events from the store,
// and show the whole conversation once, in order.
import { expect, test, Chat, replayFromGateway } from "../support";

test("a reloaded long chat shows every reply whole, its events in order once", async ({ page, context }) => {
    const chat = await Chat.open(page);
    const tail = "Line 60 of a reply long enough that a page reloaded after it is replayed from the store.";
    for (let turn = 0; turn < 2; turn++) {
        await chat.send("a long reply");
        await expect(chat.messages("assistant").nth(turn)).toContainText(tail);
        await chat.idle();
    }
    const session = await chat.session();
    const before = await chat.events();
    expect(before.length).toBeGreaterThan(1200);

    await page.reload();
    await chat.connected();
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText(["a long reply", "a long reply"]);
    await expect(chat.messages("assistant")).toHaveCount(2);
    for (const reply of await chat.messages("assistant").all()) {
        await expect(reply).toContainText("Line 1 of a reply long enough");
        await expect(reply).toContainText(tail);
    }
    const after = await chat.events();
    expect(after.map((e) => e.seq)).toEqual(after.map((_, i) => i + 1));
    expect(after).toEqual(before);

    // Another tab of the chat, and the gateway's own replay, agree.
    const other = await Chat.join(await context.newPage(), session);
    await expect(other.messages("assistant")).toHaveCount(2);
    expect(await other.events()).toEqual(before);
    expect(await replayFromGateway(page, session)).toEqual(before);

    // The chat goes on.
    await chat.send("a long reply");
    await expect(chat.messages("assistant").nth(2)).toContainText(tail);
    await chat.idle();
});
