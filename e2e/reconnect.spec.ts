import { expect, test, Chat, ofType, replayFromGateway } from "./support";

// Keeps every WebSocket the page opens in window.__sockets, so a spec can
// drop one (going offline in DevTools does not close open sockets).
function trackSockets() {
    const Native = WebSocket;
    const sockets: WebSocket[] = [];
    (window as any).__sockets = sockets;
    (window as any).WebSocket = class extends Native {
        constructor(url: string | URL, protocols?: string | string[]) {
            super(url, protocols);
            sockets.push(this);
        }
    };
}

const dropSocket = () => (window as any).__sockets.at(-1).close(3000, "dropped by the test");

test("a dropped connection mid-stream resumes and shows every piece once", async ({ page }) => {
    await page.addInitScript(trackSockets);
    const chat = await Chat.open(page);
    await chat.send("stream a long answer");
    const reply = chat.reply("Here is a long answer");
    await expect(reply).toHaveAttribute("data-streaming", "true");

    await page.evaluate(dropSocket);
    await expect.poll(() => page.evaluate(() => (window as any).__sockets.length)).toBe(2);
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
    await page.addInitScript(trackSockets);
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const card = chat.cards("confirm");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();

    await page.evaluate(dropSocket);
    await expect.poll(() => page.evaluate(() => (window as any).__sockets.length)).toBe(2);
    await chat.connected();
    await chat.recordFrames();
    // The gateway delivers the call again; the page is already asking, so it
    // keeps the one question on screen.
    await expect(card.getByTestId("confirm")).toHaveCount(1);
    await card.getByTestId("confirm-approve").click();
    await expect(chat.reply("Okay, I deleted your draft.")).toHaveCount(1);
    await chat.idle();
    const id = await card.getAttribute("data-tool-id");
    expect((await chat.sent()).filter((f) => f.id === id)).toHaveLength(1);
    expect(ofType(await replayFromGateway(page, await chat.session()), "tool.finished", id!)).toHaveLength(1);
});
