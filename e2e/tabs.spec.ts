import { attachWire, expect, test, Chat, STORAGE_KEY, ofType, replayFromGateway } from "./support";

test("two tabs on one session: confirm asks in one tab only and runs once", async ({ context, page }) => {
    const one = await Chat.open(page);
    await one.send("hello");
    await expect(one.reply("Hello!")).toBeVisible();
    await one.idle();
    const session = await one.session();

    // Tab two starts with tab one's session in its sessionStorage, as if the
    // tab had been duplicated.
    const page2 = await context.newPage();
    await page2.addInitScript(([key, session]) => {
        if (!sessionStorage.getItem(key)) sessionStorage.setItem(key, JSON.stringify({ session }));
    }, [STORAGE_KEY, session]);
    const two = await Chat.open(page2);
    expect(await two.session()).toBe(session);
    await expect(two.reply("Hello!")).toHaveCount(1);
    await one.recordFrames();
    await two.recordFrames();

    await one.send("delete my draft");
    for (const chat of [one, two]) {
        await expect(chat.cards("confirm")).toHaveCount(1);
        await expect(chat.reply("I'll ask you first.")).toBeVisible();
    }
    // Exactly one tab is asked.
    const asked = async () => [await one.cards("confirm").getByTestId("confirm-approve").count(), await two.cards("confirm").getByTestId("confirm-approve").count()];
    await expect.poll(asked).toEqual(expect.arrayContaining([1]));
    await page.waitForTimeout(500);
    const counts = await asked();
    expect([...counts].sort()).toEqual([0, 1]);
    const [asker, other] = counts[0] === 1 ? [one, two] : [two, one];
    await expect(asker.cards("confirm")).toHaveAttribute("data-local", "true");
    await expect(other.cards("confirm")).toHaveAttribute("data-local", "false");

    await asker.cards("confirm").getByTestId("confirm-approve").click();
    for (const chat of [one, two]) {
        await expect(chat.reply("Okay, I deleted your draft.")).toHaveCount(1);
        await expect(chat.cards("confirm")).toHaveAttribute("data-status", "done");
        await chat.idle();
    }
    const id = await one.cards("confirm").getAttribute("data-tool-id");
    const calls = [...(await one.received()), ...(await two.received())].filter((f) => f.type === "tool.call" && f.id === id);
    expect(calls).toHaveLength(1);
    const answers = [...(await one.sent()), ...(await two.sent())].filter((f) => f.id === id);
    expect(answers).toHaveLength(1);
    for (const record of [await one.events(), await two.events(), await replayFromGateway(page, session)]) {
        expect(ofType(record, "tool.finished", id!)).toHaveLength(1);
    }
    // Both tabs show the same conversation.
    expect(await two.events()).toEqual(await one.events());
});

test("an answer that did not count is not shown as the outcome: the box says the call was answered in another tab", async ({ context, page }) => {
    const wire = await attachWire(page);
    const one = await Chat.open(page);
    await one.send("hello");
    await one.idle();
    const two = await Chat.join(await context.newPage(), await one.session());
    // Tab one's answer leaves it, and never reaches the gateway.
    wire.delayAnswers("confirm", 60_000);
    await one.send("delete my draft");
    await one.cards("confirm").getByTestId("confirm-approve").click();
    await expect(one.cards("confirm").getByTestId("confirm-answer")).toHaveText("You approved.");
    // Tab one's socket goes: the call moves to tab two, whose user denies.
    await wire.drop();
    await two.cards("confirm").getByTestId("confirm-deny").click();
    for (const chat of [one, two]) {
        await expect(chat.reply("Okay, I kept your draft.")).toHaveCount(1);
        await expect(chat.cards("confirm")).toHaveAttribute("data-status", "done");
    }
    await expect(two.cards("confirm").getByTestId("confirm-answer")).toHaveText("You denied.");
    await expect(one.cards("confirm").getByTestId("confirm-answer")).toHaveText("Denied in another tab.");
});
