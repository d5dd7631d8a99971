// A client call is run by one tab, the lease holder. When that tab closes, or
// stops answering the gateway's pings, the call moves to another tab of the
// session that declared the tool, and settles once there.
//
// These specs run in the "lease" project (playwright.config.ts): a gateway
// that pings every second, so a silent tab loses its lease in about two.
import net from "node:net";
import type { Page } from "@playwright/test";
import { expect, test, Chat, ofType, replayFromGateway, type Frame } from "./support";

const CONFIRM = "delete my draft";
const REPLY = "Okay, I deleted your draft.";

/** The tool.call deliveries of id among frames. */
const calls = (frames: Frame[], id: string) => frames.filter((f) => f.type === "tool.call" && f.id === id);

/**
 * Tab one asks to delete the draft: it runs confirm (Approve here), tab two
 * says where the call runs. Returns the call's id.
 */
async function confirmInTabOne(one: Chat, two: Chat): Promise<string> {
    await one.send(CONFIRM);
    const mine = one.cards("confirm");
    await expect(mine.getByTestId("confirm-approve")).toBeVisible();
    await expect(mine).toHaveAttribute("data-where", "here");
    const id = (await mine.getAttribute("data-tool-id"))!;

    const theirs = two.cards("confirm");
    await expect(theirs).toHaveAttribute("data-tool-id", id);
    await expect(theirs).toHaveAttribute("data-where", "elsewhere");
    await expect(theirs.getByTestId("tool-where")).toHaveText("Running in another tab");
    await expect(theirs.getByTestId("confirm-approve")).toHaveCount(0);

    // The gateway says so too: tab one, where the message was sent, holds it.
    const started = ofType(await two.events(), "tool.started", id);
    expect(started).toHaveLength(1);
    expect(started[0].page).toBe(await one.pageId());
    return id;
}

/**
 * The call moved to tab two: it asks there, the user approves, the call
 * settles once and the model answers once; tab two was delivered it once.
 */
async function approveInTabTwo(two: Chat, id: string, session: string) {
    const card = two.cards("confirm");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();
    await expect(card).toHaveAttribute("data-where", "here");
    await expect(card.getByTestId("tool-where")).toBeHidden();
    await card.getByTestId("confirm-approve").click();

    await expect(two.reply(REPLY)).toBeVisible();
    await expect(card).toHaveAttribute("data-status", "done");
    await two.idle();
    await expect(two.reply(REPLY)).toHaveCount(1);

    const me = await two.pageId();
    expect(calls(await two.received(), id), "tool.call deliveries to tab two").toHaveLength(1);
    expect(calls(await two.received(), id)[0]).toMatchObject({ attempt: 1 });
    expect((await two.received()).filter((f) => f.type === "tool.cancel"), "tool.cancel to tab two").toEqual([]);
    const answers = (await two.sent()).filter((f) => f.id === id);
    expect(answers).toEqual([{ type: "tool.result", id, attempt: 1, result: { approved: true } }]);

    for (const record of [await two.events(), await replayFromGateway(two.page, session)]) {
        expect(ofType(record, "tool.started", id)).toHaveLength(1);
        // One move, straight to tab two: it never waited for a page.
        expect(ofType(record, "tool.leased", id)).toEqual([expect.objectContaining({ attempt: 1, page: me })]);
        const finished = ofType(record, "tool.finished", id);
        expect(finished).toHaveLength(1);
        expect(finished[0]).toMatchObject({ ok: true });
        expect(ofType(record, "message").filter((e) => e.message.role === "tool" && e.message.toolUseId === id)).toHaveLength(1);
        expect(ofType(record, "message").filter((e) => e.message.content === REPLY)).toHaveLength(1);
        expect(ofType(record, "tool.retrying", id)).toHaveLength(0);
    }
}

test("the tab running confirm closes: the other tab asks, and the call settles once", async ({ context, page }) => {
    const one = await Chat.open(page);
    const session = await one.session();
    const two = await Chat.join(await context.newPage(), session);
    await two.recordFrames();

    const id = await confirmInTabOne(one, two);

    await page.close();
    await approveInTabTwo(two, id, session);
});

/**
 * A TCP proxy on 127.0.0.1 in front of target, which can stop forwarding
 * in both directions while it keeps every socket open: to the browser and to
 * the gateway, the network went silent.
 */
async function startProxy(target: { host: string; port: number }) {
    const sockets = new Set<net.Socket>();
    let frozen = false;
    const server = net.createServer((client) => {
        const upstream = net.connect(target);
        for (const [from, to] of [[client, upstream], [upstream, client]]) {
            sockets.add(from);
            from.on("data", (chunk) => {
                if (!frozen) to.write(chunk);
            });
            from.on("end", () => to.end());
            from.on("error", () => to.destroy());
            from.on("close", () => {
                sockets.delete(from);
                to.destroy();
            });
            if (frozen) from.pause();
        }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        port: (server.address() as net.AddressInfo).port,
        /** Stops forwarding: nothing more is read from either side. */
        freeze() {
            frozen = true;
            for (const s of sockets) s.pause();
        },
        /** Forwards again, what waited first. */
        thaw() {
            frozen = false;
            for (const s of sockets) s.resume();
        },
        async close() {
            for (const s of sockets) s.destroy();
            await new Promise((resolve) => server.close(resolve));
        },
    };
}

test("a tab that stops answering pings loses confirm to the other tab", async ({ context, page, baseURL }) => {
    const gateway = new URL(baseURL!);
    const proxy = await startProxy({ host: gateway.hostname, port: Number(gateway.port) });
    let page2: Page | undefined;
    try {
        // Tab one reaches the gateway through the proxy, tab two directly:
        // another origin, but the same host, so the same cookie and browser.
        const one = await Chat.open(page, `http://127.0.0.1:${proxy.port}/`);
        const session = await one.session();
        page2 = await context.newPage();
        const two = await Chat.join(page2, session);
        await one.recordFrames();
        await two.recordFrames();

        const id = await confirmInTabOne(one, two);

        // Tab one's network goes silent: its socket stays open, but the
        // gateway's pings get no pong, so it closes the page and moves the call.
        await page.evaluate(() => {
            const w = window as any;
            w.__closes = [];
            w.gatewayClient.on("state", (s: any) => s.state === "closed" && w.__closes.push(s.code));
        });
        const frozenAt = Date.now();
        proxy.freeze();
        await expect(two.cards("confirm").getByTestId("confirm-approve")).toBeVisible();
        const movedAfter = Date.now() - frozenAt;
        test.info().annotations.push({ type: "lease moved after", description: `${movedAfter} ms` });
        await approveInTabTwo(two, id, session);

        // The network comes back: tab one hears the close (4000), resumes,
        // and learns the call settled elsewhere. It never answered it.
        proxy.thaw();
        await one.connected();
        const card = one.cards("confirm");
        await expect(card).toHaveAttribute("data-status", "done");
        await expect(card).not.toHaveAttribute("data-where", /.*/);
        await expect(card.getByTestId("confirm-approve")).toBeDisabled();
        await expect(one.reply(REPLY)).toHaveCount(1);
        await one.idle();
        expect((await one.sent()).filter((f) => f.id === id), "answers from tab one").toEqual([]);
        expect(calls(await one.received(), id), "tool.call deliveries to tab one").toHaveLength(1);
        expect(await one.page.evaluate(() => (window as any).__closes), "tab one's socket closes").toEqual([4000]);
        expect(await one.events()).toEqual(await two.events());
    } finally {
        // Close the tab before the proxy, so that it never sees its gateway go away.
        await page.close();
        await page2?.close();
        await proxy.close();
    }
});
