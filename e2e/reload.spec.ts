import { expect, test, Chat, ofType, replayFromGateway } from "./support";

test("a reload while confirm waits restores the conversation and settles the call once", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const card = chat.cards("confirm");
    await expect(card.getByTestId("confirm-question")).toHaveText("Delete your draft?");
    const session = await chat.session();
    const id = await card.getAttribute("data-tool-id");

    await page.reload();
    await chat.connected();

    // The same conversation, on screen at once.
    expect(await chat.session()).toBe(session);
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText(["delete my draft"]);
    await expect(chat.reply("I'll ask you first.")).toHaveCount(1);
    await expect(card).toHaveCount(1);
    await expect(card).toHaveAttribute("data-tool-id", id!);
    // The gateway delivers the waiting call again, so the page asks again.
    await expect(card.getByTestId("confirm-question")).toHaveText("Delete your draft?");
    await chat.recordFrames();
    await card.getByTestId("confirm-approve").click();

    await expect(card).toHaveAttribute("data-status", "done");
    // This page did not see the call begin: it gives no time it took.
    await expect(card.getByTestId("tool-time")).toHaveText("");
    await expect(chat.reply("Okay, I deleted your draft.")).toHaveCount(1);
    await chat.idle();
    const answers = (await chat.sent()).filter((f) => f.id === id);
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ type: "tool.result", attempt: 1, result: { approved: true } });

    // Exactly once, on the page and in the gateway's own record.
    const events = await chat.events();
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    for (const record of [events, await replayFromGateway(page, session)]) {
        expect(ofType(record, "tool.finished", id!)).toHaveLength(1);
        expect(ofType(record, "tool.finished", id!)[0].ok).toBe(true);
        const tool = ofType(record, "message").filter((e) => e.message.role === "tool");
        expect(tool).toHaveLength(1);
        const replies = ofType(record, "message").filter((e) => e.message.content === "Okay, I deleted your draft.");
        expect(replies).toHaveLength(1);
    }
});

test("a reload after a finished turn shows the conversation without replaying it twice", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what's the weather in Tokyo");
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();
    const before = await chat.events();

    await page.reload();
    await chat.connected();
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toHaveCount(1);
    await expect(chat.cards("get_weather")).toHaveCount(1);
    await expect(chat.cards("get_weather")).toHaveAttribute("data-status", "done");
    expect(await chat.events()).toEqual(before);

    // The conversation goes on in the same session.
    await chat.send("what's the weather in San Francisco");
    await expect(chat.reply("get_weather returned: It's foggy in San Francisco.")).toBeVisible();
    await expect(chat.cards("get_weather")).toHaveCount(2);
});
