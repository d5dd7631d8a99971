// Specs against a gateway running a script of our own (script.json next to
// this file), the way you would test your own chat UI: the scripted model
// calls the page's tools with arguments the demo script never sends.
import { expect, test, Chat, ofType } from "../support";

for (const { phrase, status } of [
    { phrase: "bad theme", status: "invalid" },
    { phrase: "broken theme", status: "malformed" },
]) {
    test(`a browser tool called with ${status} arguments answers with the proposed error`, async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.recordFrames();
        await chat.send(phrase);

        const card = chat.cards("set_theme");
        await expect(card).toHaveAttribute("data-local", "true");
        await expect(card).toHaveAttribute("data-status", "error");
        await expect(card.getByTestId("tool-input")).toHaveAttribute("data-input-status", status);
        await chat.idle();

        // The page was asked, did not run the tool, and answered with the
        // gateway's ready-made error.
        const [call] = ofType(await chat.received(), "tool.call");
        expect(call.input.status).toBe(status);
        expect(call.proposed).toBeTruthy();
        const answers = (await chat.sent()).filter((f) => f.id === call.id);
        expect(answers).toEqual([{ ...call.proposed, type: "tool.error", id: call.id, attempt: call.attempt }]);
        await expect(page.locator("html")).not.toHaveAttribute("data-theme", /.+/);

        const [sent] = await chat.toolMessages("set_theme");
        expect(sent.isError).toBe(true);
        expect(sent.content).toContain(call.proposed.error);
        await expect(chat.reply(`set_theme failed: ${sent.content}`)).toBeVisible();
    });
}

test("a tool nobody declared fails, and the model is told", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("unknown tool");
    const card = chat.cards("launch_rockets");
    await expect(card).toHaveAttribute("data-status", "error");
    await chat.idle();
    const [sent] = await chat.toolMessages("launch_rockets");
    expect(sent.isError).toBe(true);
    await expect(chat.reply(`launch_rockets failed: ${sent.content}`)).toBeVisible();
});

test("two parallel browser calls both run, and the reply words both in order", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.recordFrames();
    await chat.send("two clocks");
    await expect(chat.cards("get_local_time")).toHaveCount(2);
    for (const card of await chat.cards("get_local_time").all()) await expect(card).toHaveAttribute("data-status", "done");
    await chat.idle();

    const results = (await chat.sent()).filter((f) => f.type === "tool.result");
    expect(results.map((f) => f.id).sort()).toEqual(["call_1", "call_2"]);
    const sent = await chat.toolMessages("get_local_time");
    expect(sent).toHaveLength(2);
    const byId = Object.fromEntries(sent.map((m) => [m.toolUseId, m.content]));
    await expect(chat.messages("assistant").last().getByTestId("message-text"))
        .toHaveText(`get_local_time returned: ${compact(byId.call_1)} get_local_time returned: ${compact(byId.call_2)}`);
});

/** The result as the scripted model words it: JSON compacted. */
function compact(json: string): string {
    return JSON.stringify(JSON.parse(json));
}
