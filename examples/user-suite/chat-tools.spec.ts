// A user's end-to-end tests of a chat UI's browser tools under faults, with
// nothing but the test kit: the kit starts the gateway binary with this
// suite's script (options.ts), `wire` sits between the page and the
// gateway, and `replay` reads the gateway's own record of the session.
// The UI under test is the gateway's chat page; with your own UI, only the
// selectors of `chat` change.
import { expect, replay, test, type Wire } from "@clienttools/gateway-testkit";
import type { Page } from "@playwright/test";
import { gatewayOptions } from "./options";

const chat = {
    async open(page: Page) {
        await page.goto("/");
        await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");
    },
    async send(page: Page, text: string) {
        await page.getByTestId("prompt").fill(text);
        await page.getByTestId("prompt").press("Enter");
    },
    reply: (page: Page, text: string | RegExp) =>
        page.getByTestId("message").and(page.locator('[data-role="assistant"]')).filter({ hasText: text }),
    card: (page: Page, name: string) => page.locator(`[data-testid="tool-card"][data-tool-name="${name}"]`),
};

/** The session's id, from the gateway's session.opened. */
async function sessionOf(wire: Wire): Promise<string> {
    return (await wire.waitForFrame((f) => f.type === "session.opened", { direction: "received" })).session;
}

/** How often the gateway recorded the call as settled. */
async function settled(page: Page, wire: Wire, id: string): Promise<number> {
    const events = await replay(page, await sessionOf(wire));
    return events.filter((e) => e.type === "tool.finished" && e.id === id).length;
}

test.describe("calls the test answers in the page's place", () => {
    test.use({ wireOptions: { hold: ["get_local_time"] } });

    test("a held call is answered by the test, and the model reads that answer", async ({ page, wire }) => {
        await chat.open(page);
        await chat.send(page, "what time is it");
        const call = await wire.toolCall("get_local_time");
        expect(call.held).toBe(true);
        expect(call.attempt).toBe(1);
        call.answer({ time: "2030-01-02T03:04:05Z", timeZone: "Mars/Olympus" });
        await expect(chat.reply(page, "Mars/Olympus")).toBeVisible();
        await expect(chat.card(page, "get_local_time")).toHaveAttribute("data-status", "done");
        expect(await settled(page, wire, call.id)).toBe(1);
    });

    test("a held call handed to the page after all runs there", async ({ page, wire }) => {
        await chat.open(page);
        await chat.send(page, "what time is it");
        const call = await wire.toolCall("get_local_time");
        await expect(chat.card(page, "get_local_time")).toHaveAttribute("data-status", "running");
        expect(wire.frames("sent").filter((f) => f.frame.id === call.id)).toEqual([]);
        call.deliver();
        await expect(chat.reply(page, "Your clock says")).toBeVisible();
        const answers = wire.frames("sent").filter((f) => f.frame.type === "tool.result" && f.frame.id === call.id);
        expect(answers).toHaveLength(1);
        expect(answers[0].byTest).toBe(false);
        expect(await settled(page, wire, call.id)).toBe(1);
    });

    test("a call the test fails reaches the model as the tool's error", async ({ page, wire }) => {
        await chat.open(page);
        await chat.send(page, "what time is it");
        (await wire.toolCall("get_local_time")).fail("The clock is broken.");
        await expect(chat.reply(page, "I could not read your clock: The clock is broken.")).toBeVisible();
        await expect(chat.card(page, "get_local_time")).toHaveAttribute("data-status", "error");
    });

    test("a socket dropped mid-call: the gateway delivers the same attempt again after the reconnect", async ({ page, wire }) => {
        await chat.open(page);
        await chat.send(page, "what time is it");
        const first = await wire.toolCall("get_local_time");
        const dropped = await wire.drop();
        await wire.reconnected({ after: dropped });
        const again = await wire.toolCall("get_local_time");
        expect({ id: again.id, attempt: again.attempt }).toEqual({ id: first.id, attempt: first.attempt });
        expect(again.socket).toBeGreaterThan(first.socket);
        again.answer({ time: "2030-01-02T03:04:05Z", timeZone: "UTC" });
        await expect(chat.reply(page, "Your clock says")).toHaveCount(1);
        expect(await settled(page, wire, first.id)).toBe(1);
    });
});

test("a socket dropped while the page asks the user: the user answers once, the call settles once", async ({ page, wire }) => {
    await chat.open(page);
    await chat.send(page, "delete my draft");
    const call = await wire.toolCall("confirm");
    const card = chat.card(page, "confirm");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();
    await wire.reconnected({ after: await wire.drop() });
    await card.getByTestId("confirm-approve").click();
    await expect(chat.reply(page, "You answered")).toHaveCount(1);
    const answers = wire.frames("sent").filter((f) => f.frame.type === "tool.result" && f.frame.id === call.id);
    expect(answers).toHaveLength(1);
    expect(await settled(page, wire, call.id)).toBe(1);
});

test("a socket that dies without a close as the user answers: the page finds it dead, and the answer goes again", async ({ page, wire }) => {
    test.slow(); // the SDK waits its answerTimeout, 15 s on the chat page, before it gives the socket up
    await chat.open(page);
    await chat.send(page, "delete my draft");
    const call = await wire.toolCall("confirm");
    const card = chat.card(page, "confirm");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();
    const stalled = await wire.stall(); // a network path that died: nothing crosses, nothing closes
    await card.getByTestId("confirm-approve").click();
    await wire.reconnected({ after: stalled, timeout: 30_000 });
    await expect(chat.reply(page, "You answered")).toHaveCount(1);
    const answers = wire.frames("sent").filter((f) => f.frame.type === "tool.result" && f.frame.id === call.id);
    expect(answers.map((f) => f.socket)).toEqual([stalled, stalled + 1]); // lost with the dead path, then again
    expect(await settled(page, wire, call.id)).toBe(1);
});

test("a duplicated answer is refused, and the call settles once", async ({ page, wire }) => {
    wire.duplicateAnswers("get_local_time");
    await chat.open(page);
    await chat.send(page, "what time is it");
    const call = await wire.toolCall("get_local_time");
    await expect(chat.reply(page, "Your clock says")).toHaveCount(1);
    await expect.poll(() => wire.refusals().map((f) => f.code)).toContain("settled");
    expect(await settled(page, wire, call.id)).toBe(1);
});

test("the gateway's record, read mid-test, is not one of the page's sockets", async ({ page, wire, gateway }) => {
    await chat.open(page);
    await chat.send(page, "what time is it");
    const call = await wire.toolCall("get_local_time");
    await expect(chat.reply(page, "Your clock says")).toBeVisible();
    const opens = () => wire.frames("sent").filter((f) => f.frame.type === "session.open").length;
    const reconnect = wire.reconnected({ after: 1, timeout: 1500 }).then(() => "resolved", () => "timed out");
    expect(await settled(page, wire, call.id)).toBe(1);
    // Read from the gateway's own URL, as a page of another origin reads it.
    const record = await replay(page, await sessionOf(wire), { url: gateway.wsURL });
    expect(record.filter((e) => e.type === "tool.finished" && e.id === call.id)).toHaveLength(1);
    expect(wire.sockets).toBe(1);
    expect(opens()).toBe(1);
    expect(await reconnect).toBe("timed out");
});
