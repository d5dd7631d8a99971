import { expect, test, Chat, ofType } from "./support";

for (const { phrase, say, status } of [
    { phrase: "test invalid", say: "Calling get_weather with arguments that lack the required city.", status: "invalid" },
    { phrase: "test malformed", say: "Calling get_weather with malformed arguments.", status: "malformed" },
]) {
    test(`${status} arguments: the error shows on the card and reaches the model`, async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.send(phrase);
        await expect(chat.reply(say)).toBeVisible();

        const card = chat.cards("get_weather");
        await expect(card).toHaveAttribute("data-status", "error");
        await expect(card.getByTestId("tool-input")).toHaveAttribute("data-input-status", status);
        await expect(card.getByTestId("tool-input")).toContainText(`Arguments are ${status}`);
        await chat.idle();

        const events = await chat.events();
        const started = ofType(events, "tool.started")[0];
        expect(started.input.status).toBe(status);
        const [sent] = await chat.toolMessages("get_weather");
        expect(sent.isError).toBe(true);
        await expect(card.getByTestId("tool-error")).toContainText(sent.content);
        await expect(chat.reply(`get_weather failed: ${sent.content}`)).toBeVisible();
    });
}

test("a result that breaks the output schema settles as an error and never reaches the model", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.recordFrames();
    await chat.send("test bad output");
    await expect(chat.reply("Calling bad_output, a page tool whose result breaks its output schema.")).toBeVisible();

    const card = chat.cards("bad_output");
    await expect(card).toHaveAttribute("data-local", "true");
    await expect(card).toHaveAttribute("data-status", "error");
    await expect(card.getByTestId("tool-result")).toBeHidden();
    await expect(chat.reply("bad_output failed:")).toBeVisible();
    await chat.idle();

    // The page did answer "not an object"...
    const answers = (await chat.sent()).filter((f) => f.type === "tool.result");
    expect(answers.map((f) => f.result)).toEqual(["not an object"]);
    // ...but the model was given an error instead, and never that text.
    const [sent] = await chat.toolMessages("bad_output");
    expect(sent.isError).toBe(true);
    expect(sent.content).not.toContain("not an object");
    const events = await chat.events();
    const finished = ofType(events, "tool.finished")[0];
    expect(finished.ok).toBe(false);
    for (const e of ofType(events, "message")) expect(e.message.content ?? "").not.toContain("not an object");
    await expect(card.getByTestId("tool-error")).toContainText(sent.content);
});
