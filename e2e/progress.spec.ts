import { expect, test, Chat, ofType } from "./support";

// slow_upload takes five parts of 400 ms, two seconds in all, with a 1s
// timeout and a 15s maxTimeout: each part's tool.progress moves the
// deadline on, so the one attempt finishes. The card shows the progress.
test("a browser tool that reports progress outlives its timeout, and its card shows how far it is", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.recordFrames();
    await chat.send("test progress");

    const card = chat.cards("slow_upload");
    await expect(card.getByTestId("tool-progress")).toHaveText(/uploading · [1-4] of 5/);
    await expect(card).toHaveAttribute("data-status", "done", { timeout: 10_000 });
    await expect(card.getByTestId("tool-progress")).toBeHidden();
    await chat.idle();

    const events = await chat.events();
    const id = ofType(events, "tool.started")[0].id;
    expect(ofType(events, "tool.started", id)).toHaveLength(1); // one attempt, never timed out
    const progress = ofType(events, "tool.progress", id);
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3, 4, 5]);
    expect(progress[0]).toMatchObject({ attempt: 1, total: 5, message: "uploading" });
    // Each report moved the deadline later.
    const deadlines = progress.map((p) => Date.parse(p.deadline));
    expect(deadlines.every((d, i) => i === 0 || d >= deadlines[i - 1])).toBe(true);
    expect(deadlines[4]).toBeGreaterThan(Date.parse(ofType(events, "tool.started", id)[0].deadline));
    const [finished] = ofType(events, "tool.finished", id);
    expect(finished.ok).toBe(true);
    // The page sent one frame per part, then the result.
    const sent = (await chat.sent()).filter((f) => f.id === id).map((f) => f.type);
    expect(sent).toEqual(["tool.progress", "tool.progress", "tool.progress", "tool.progress", "tool.progress", "tool.result"]);
});
