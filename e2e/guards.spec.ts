import { expect, test, Chat, ofType } from "./support";

// The demo script's "test loop" calls next_page after every result, as a
// model stuck in a loop does; the gateway's default guard (25 model turns
// for one message) stops it, the page says why, and the user can type again.
test("a looping model is stopped by the guard, and the page says why", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test loop");

    const notice = page.getByTestId("notice-text").filter({ hasText: "25 turns" });
    await expect(notice).toBeVisible({ timeout: 15_000 });
    await expect(notice).toHaveText("Stopped: the model took 25 turns to answer one message, the limit.");
    await chat.idle();
    await expect(page.getByTestId("prompt")).toBeEnabled();

    const events = await chat.events();
    const tripped = ofType(events, "guard.tripped");
    expect(tripped).toHaveLength(1);
    expect(tripped[0]).toMatchObject({ guard: "model_turns", limit: 25, value: 25 });
    expect(ofType(events, "model.finished")).toHaveLength(25);
    // The loop ran on the server: one next_page per turn, each settled once.
    const finished = ofType(events, "tool.finished");
    expect(finished).toHaveLength(25);
    expect(new Set(finished.map((f) => f.id)).size).toBe(25);

    // The next message starts the counts again.
    await chat.send("hello");
    await expect(chat.reply("Hello! I'm the demo's scripted model.")).toBeVisible();
    await chat.idle();
});
