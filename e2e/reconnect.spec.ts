import { attachWire, expect, test, Chat, ofType, replayFromGateway } from "./support";

// The test kit's wire sits between the page and the gateway: wire.drop()
// closes the page's socket both ways (going offline in DevTools does not
// close open sockets), and the SDK reconnects as after a real drop.

test("a dropped connection mid-stream resumes and shows every piece once", async ({ page }) => {
    const wire = await attachWire(page);
    const chat = await Chat.open(page);
    await chat.send("stream a long answer");
    const reply = chat.reply("Here is a long answer");
    // Drop as soon as the stream has begun (not when the page shows it: on a
    // busy machine the page may render the whole burst at once).
    await wire.waitForFrame((f) => f.type === "model.delta", { direction: "received" });
    const dropped = await wire.drop();
    const finished = (n: number) => wire.frames("received").filter((f) => f.socket === n && f.frame.type === "model.finished");
    expect(finished(dropped), "the stream was still going when the socket dropped").toEqual([]);
    await wire.reconnected({ after: dropped });
    await chat.connected();

    await expect(reply).toHaveAttribute("data-streaming", "false");
    await chat.idle();
    const events = await chat.events();
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const full = ofType(events, "message").filter((e) => e.message.role === "assistant").at(-1)!.message.content;
    await expect(reply.getByTestId("message-text")).toHaveText(full);
    expect(events).toEqual(await replayFromGateway(page, await chat.session()));
});

test("a browser call survives a dropped connection and settles once", async ({ page }) => {
    const wire = await attachWire(page);
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const card = chat.cards("confirm");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();
    const first = await wire.toolCall("confirm");

    await wire.reconnected({ after: await wire.drop() });
    await chat.connected();
    await chat.recordFrames();
    // The gateway delivers the same attempt again; the page is already
    // asking, so it keeps the one question on screen.
    const again = await wire.toolCall("confirm");
    expect({ id: again.id, attempt: again.attempt }).toEqual({ id: first.id, attempt: first.attempt });
    await expect(card.getByTestId("confirm")).toHaveCount(1);
    await card.getByTestId("confirm-approve").click();
    await expect(chat.reply("Okay, I deleted your draft.")).toHaveCount(1);
    await chat.idle();
    const id = await card.getAttribute("data-tool-id");
    expect((await chat.sent()).filter((f) => f.id === id)).toHaveLength(1);
    expect(ofType(await replayFromGateway(page, await chat.session()), "tool.finished", id!)).toHaveLength(1);
});

test("a message lost with its socket goes again, and the chat shows it and its reply once", async ({ page }) => {
    const wire = await attachWire(page);
    const chat = await Chat.open(page);
    wire.delayMessages(60_000); // the message is on its way when the socket drops: lost
    await chat.send("what's the weather in Tokyo");
    const first = await wire.waitForFrame((f) => f.type === "message", { direction: "sent" });
    wire.delayMessages(0);
    const dropped = await wire.drop();
    await wire.reconnected({ after: dropped });

    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText(["what's the weather in Tokyo"]);
    const sent = wire.frames("sent").filter((f) => f.frame.type === "message");
    expect(sent.map((f) => [f.socket, f.frame.id])).toEqual([[dropped, first.id], [dropped + 1, first.id]]);
    const taken = wire.frames("received").filter((f) => f.frame.type === "message.taken");
    expect(taken.map((f) => [f.socket, f.frame.id])).toEqual([[dropped + 1, first.id]]);
    const users = (await replayFromGateway(page, await chat.session())).filter((e) => e.type === "message" && e.message.role === "user");
    expect(users.map((e) => [e.message.content, e.message.id])).toEqual([["what's the weather in Tokyo", first.id]]);
});

test("a message that reaches the gateway twice is taken once", async ({ page }) => {
    const wire = await attachWire(page);
    const chat = await Chat.open(page);
    wire.duplicateMessages(2);
    await chat.send("what's the weather in Tokyo");
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();
    await expect(chat.messages("user")).toHaveCount(1);
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toHaveCount(1);
    const [sent] = wire.frames("sent").filter((f) => f.frame.type === "message");
    // Each copy is confirmed.
    await expect.poll(() => wire.frames("received").filter((f) => f.frame.type === "message.taken").map((f) => f.frame.id))
        .toEqual([sent.frame.id, sent.frame.id]);
    const users = (await replayFromGateway(page, await chat.session())).filter((e) => e.type === "message" && e.message.role === "user");
    expect(users.map((e) => e.message.id)).toEqual([sent.frame.id]);
    expect(wire.refusals()).toEqual([]);
});

// A wire attached after the page opened its socket routes nothing; its
// waits say so, where they timed out with an empty record and no hint.
test("a wire attached too late says no socket came through it", async ({ page }) => {
    const chat = await Chat.open(page);
    const late = await attachWire(page, { timeout: 300 });
    await chat.send("what time is it");
    await expect(late.toolCall("get_local_time")).rejects.toThrow("wire: a tool.call of get_local_time did not come within 300 ms (no socket of the page came through the wire: attach it before page.goto");
});
