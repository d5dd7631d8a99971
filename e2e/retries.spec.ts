import { expect, test, Chat, ofType } from "./support";

// The gateway's policy for never_answers: attempts 2, timeout "1s", backoff "200ms".
test("a browser tool that never answers times out, is retried, then fails", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.recordFrames();
    await chat.send("test slow tool");

    await expect(chat.reply("Calling never_answers, a page tool that never answers.")).toBeVisible();
    const card = chat.cards("never_answers");
    await expect(card).toHaveAttribute("data-local", "true");
    await expect(card).toHaveAttribute("data-status", "running");
    // Attempt 1 lasts one second: on a loaded machine the page may already
    // show attempt 2; the recorded events below pin down both.
    await expect(card.getByTestId("tool-attempt")).toHaveText(/attempt [12] of 2/);

    // Attempt 1 times out; the card says so, and waits before attempt 2.
    await expect(card.getByTestId("tool-attempts").getByTestId("tool-failure")).toHaveCount(1);
    await expect(card.getByTestId("tool-failure").first()).toContainText("Attempt 1 of 2 failed (timeout)");
    await expect(card.getByTestId("tool-attempt")).toHaveText("attempt 2 of 2");

    // Attempt 2 times out too: the call settles as an error.
    await expect(card).toHaveAttribute("data-status", "error", { timeout: 5000 });
    await expect(card.getByTestId("tool-status")).toHaveText("Error");
    await expect(card.getByTestId("tool-error")).toContainText(/time/i);
    await expect(chat.reply("never_answers failed:")).toBeVisible();
    await chat.idle();

    const events = await chat.events();
    const id = ofType(events, "tool.started")[0].id;
    expect(ofType(events, "tool.started", id).map((e) => e.attempt)).toEqual([1, 2]);
    const retrying = ofType(events, "tool.retrying", id);
    expect(retrying).toHaveLength(1);
    expect(retrying[0]).toMatchObject({ attempt: 1, attempts: 2, code: "timeout" });
    const finished = ofType(events, "tool.finished", id);
    expect(finished).toHaveLength(1);
    expect(finished[0].ok).toBe(false);

    // Each attempt was delivered to the page once and cancelled once, and the
    // page never answered an attempt the gateway had given up on.
    const received = await chat.received();
    expect(ofType(received, "tool.call", id).map((f) => f.attempt)).toEqual([1, 2]);
    expect(ofType(received, "tool.cancel", id).map((f) => f.attempt)).toEqual([1, 2]);
    expect((await chat.sent()).filter((f) => f.id === id)).toEqual([]);

    // The model saw the timeout.
    const [sent] = await chat.toolMessages("never_answers");
    expect(sent.isError).toBe(true);
    expect(sent.content).toMatch(/time/i);
    await expect(chat.reply("never_answers failed:")).toContainText(sent.content);
});
