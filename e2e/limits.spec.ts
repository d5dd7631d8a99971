// The gateway's limits on what a page sends (session.opened's `limits`):
// the SDK refuses what the gateway would refuse, in words, instead of losing
// it. First on the real gateway (the demo's, 1 MiB frames, 256 KiB
// messages), then on the fake WebSocket of sdk.spec.ts for the cases the
// real one makes hard to stage (other limits, a message queued offline, a
// reconnect that lowers the limit).
import { expect, test, Chat, ofType, installFakeSocket } from "./support";

test.describe("on the gateway", () => {
    test("a paste over the message limit stays in the box, says why, and the chat goes on", async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.recordFrames();
        const pageId = await chat.pageId();
        await page.evaluate(() => {
            const w = window as any;
            w.__states = [];
            w.gatewayClient.on("state", ({ state }: any) => w.__states.push(state));
        });
        expect(await page.evaluate(() => (window as any).gatewayClient.limits)).toEqual({ frameBytes: 1048576, messageBytes: 262144 });

        // A 300 KB paste, put in the box as a paste does (fill would type it).
        const prompt = page.getByTestId("prompt");
        await prompt.evaluate((el: HTMLTextAreaElement) => {
            el.value = "x".repeat(300_000);
            el.dispatchEvent(new Event("input", { bubbles: true }));
        });
        await prompt.press("Enter");

        await expect(page.getByTestId("notice-text").last())
            .toHaveText("Your message was not sent: The message is 300,000 bytes; the gateway takes at most 262,144.");
        await expect(page.getByTestId("notice").last()).toHaveAttribute("data-kind", "error");
        expect(await prompt.evaluate((el: HTMLTextAreaElement) => el.value.length), "the text stays in the box").toBe(300_000);
        await expect(page.locator("[data-chat]")).toHaveAttribute("data-busy", "false");
        expect(ofType(await chat.sent(), "message"), "nothing was sent").toEqual([]);
        expect(await chat.messages("user").count()).toBe(0);
        // Nothing said yet: the suggestions stay, below the notice.
        await expect(page.getByTestId("empty-chat")).toBeVisible();
        await expect(page.getByTestId("notice")).toBeVisible();

        // The connection is the same one, and the session takes the next message.
        await chat.send("hello");
        await expect(chat.reply("Hello! I'm the demo's scripted model.")).toBeVisible();
        await chat.idle();
        expect(ofType(await chat.sent(), "message")).toEqual([{ type: "message", content: "hello", id: expect.any(String) }]);
        expect(await chat.pageId()).toBe(pageId);
        expect(await page.evaluate(() => (window as any).__states)).toEqual([]);
    });

    test("a tool result over the frame limit fails the call in words; the socket stays and the session goes on", async ({ page }) => {
        await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
        // Any page of the gateway's origin will do: the SDK is imported from /static/.
        await page.goto("/healthz");
        const out = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            const until = async (fn: () => boolean, what: string, ms = 15_000) => {
                const start = performance.now();
                while (!fn()) {
                    if (performance.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
                    await new Promise((r) => setTimeout(r, 20));
                }
            };
            let runs = 0;
            const client = connect({
                storage: null,
                // About 1.5 MB: over the gateway's 1 MiB frames.
                tools: { get_local_time: () => { runs++; return { time: "x".repeat(1_500_000), timeZone: "UTC" }; } },
            });
            const states: string[] = [];
            const sent: any[] = [];
            client.on("state", ({ state }: any) => states.push(state));
            client.on("send", (f: any) => sent.push(f));
            await until(() => client.state === "open", "the session to open");
            const limits = client.limits;
            // The turn of the user's message text has ended: session.idle follows it.
            const ended = (text: string) => {
                const events = client.events;
                const i = events.findIndex((e: any) => e.type === "message" && e.message.role === "user" && e.message.content === text);
                return i >= 0 && events.slice(i).some((e: any) => e.type === "session.idle");
            };

            client.send("what time is it");
            await until(() => ended("what time is it"), "the first turn to end");
            const events = client.events;
            const finished = events.find((e: any) => e.type === "tool.finished");
            const transcript = events.find((e: any) => e.type === "message" && e.message.role === "tool")?.message;
            const reply = events.filter((e: any) => e.type === "message" && e.message.role === "assistant").at(-1)?.message.content;

            client.send("hello");
            await until(() => ended("hello"), "the second turn to end");
            const hello = client.events.filter((e: any) => e.type === "message" && e.message.role === "assistant").at(-1)?.message.content;
            const card = client.cards[0];
            client.close();
            return {
                limits, runs, states, finished, transcript, reply, hello, card,
                answers: sent.filter((f) => f.type === "tool.result" || f.type === "tool.error"),
            };
        });
        expect(out.limits).toEqual({ frameBytes: 1048576, messageBytes: 262144 });
        expect(out.runs).toBe(1);

        // The page sent a terminal tool.error in place of the result, once.
        expect(out.answers).toHaveLength(1);
        const [answer] = out.answers;
        expect(answer).toMatchObject({ type: "tool.error", attempt: 1, code: "tool_failed", retryable: false });
        expect(answer.error).toMatch(/^The tool's result was 1,500,\d{3} bytes, over the gateway's limit of 1,048,576 bytes per frame, so the page did not send it\.$/);
        expect(answer.detail).toEqual({ bytes: expect.any(Number), limit: 1048576 });

        // The call settled with it, the model read it, and the card shows it.
        expect(out.finished).toMatchObject({ ok: false, name: "get_local_time", code: "tool_failed", error: answer.error });
        expect(out.transcript).toMatchObject({ isError: true, name: "get_local_time" });
        expect(out.transcript.content).toContain("over the gateway's limit of 1,048,576 bytes");
        expect(out.reply).toBe(`get_local_time failed: ${answer.error}`);
        expect(out.card).toMatchObject({ status: "error", error: answer.error, localState: "answered" });

        // One socket all along: no 1009, no reconnect; and the next turn works.
        expect(out.states).toEqual(["connecting", "open", "closed"]);
        expect(out.hello).toMatch(/^Hello! I'm the demo's scripted model\./);
    });
});

test.describe("on a fake gateway", () => {
    test.beforeEach(async ({ page }) => {
        await installFakeSocket(page);
        await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
        await page.goto("/healthz");
    });

    test("session.opened's limits hold: bytes of UTF-8, and the frame's own size", async ({ page }) => {
        const out = await page.evaluate(async () => {
            const { connect, LimitError, FRAME_ERROR } = await import("/static/gateway.js");
            const w = window as any;
            const client = connect({ WebSocket: w.FakeSocket, storage: null });
            const errors: any[] = [];
            client.on("error", (e: any) => errors.push(e));
            await w.until(() => w.FakeSocket.sockets.length === 1);
            const ws = w.FakeSocket.last();
            ws.accept();
            const before = client.limits;
            ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1", limits: { frameBytes: 500, messageBytes: 100 } });
            const refuse = (text: string) => {
                try {
                    client.send(text);
                    return null;
                } catch (err: any) {
                    return { isLimitError: err instanceof LimitError, code: err.code, message: err.message, bytes: err.bytes, limit: err.limit };
                }
            };
            return {
                before, after: client.limits, code: FRAME_ERROR.LIMIT_EXCEEDED,
                // 51 characters, 102 bytes.
                accents: refuse("é".repeat(51)),
                // 99 bytes of text, but each \u0001 takes six in JSON.
                escapes: refuse("\u0001".repeat(99)),
                fits: refuse("é".repeat(50)),
                errors, sent: ws.sent.slice(1), state: client.state,
            };
        });
        expect(out.before).toEqual({ frameBytes: 1048576, messageBytes: 262144 });
        expect(out.after).toEqual({ frameBytes: 500, messageBytes: 100 });
        expect(out.accents).toEqual({
            isLimitError: true, code: out.code, bytes: 102, limit: 100,
            message: "The message is 102 bytes; the gateway takes at most 100.",
        });
        expect(out.escapes).toMatchObject({ isLimitError: true, code: "limit_exceeded", limit: 500 });
        expect(out.escapes!.message).toMatch(/^The message takes 6\d\d bytes to send; the gateway reads at most 500 at once\.$/);
        expect(out.fits).toBeNull();
        expect(out.errors.map((e: any) => [e.code, e.message, e.refused?.content.length, e.seq])).toEqual([
            ["limit_exceeded", out.accents!.message, 51, undefined],
            ["limit_exceeded", out.escapes!.message, 99, undefined],
        ]);
        expect(out.sent).toEqual([{ type: "message", content: "é".repeat(50), id: expect.any(String) }]);
        expect(out.state).toBe("open");
    });

    test("a message dropped for the limits the gateway then tells leaves the stored copy too: a reload does not find it", async ({ page }) => {
        const out = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            const w = window as any;
            const storage = new w.MemoryStorage();
            const client = connect({ WebSocket: w.FakeSocket, storage });
            const stored = () => (JSON.parse(storage.getItem("gateway.session") ?? "null")?.unsent ?? []).map((m: any) => m.content.length);
            await w.until(() => w.FakeSocket.sockets.length === 1);
            const ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
            ws.drop();
            client.send("y".repeat(200)); // offline: it waits, and is stored
            await w.until(() => stored().length === 1);
            await w.until(() => w.FakeSocket.sockets.length === 2);
            const again = w.FakeSocket.last();
            again.accept();
            again.push({ type: "session.opened", session: "s1", seq: 0, page: "p2", limits: { frameBytes: 4096, messageBytes: 100 } });
            await w.until(() => stored().length === 0, 3000).catch(() => {});
            return { unsent: stored(), sent: again.sent.slice(1) };
        });
        expect(out.sent).toEqual([]);
        expect(out.unsent).toEqual([]);
    });

    test("a message queued offline and over the limits the gateway then tells is refused, not sent", async ({ page }) => {
        const out = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            const w = window as any;
            const client = connect({ WebSocket: w.FakeSocket, storage: null });
            const errors: any[] = [];
            client.on("error", (e: any) => errors.push(e));
            let thrown = null;
            try {
                client.send("x".repeat(300_000)); // over the defaults: refused at once
            } catch (err: any) {
                thrown = err.message;
            }
            client.send("y".repeat(200)); // fits the defaults: queued
            client.send("short");
            client.cancel();
            await w.until(() => w.FakeSocket.sockets.length === 1);
            const ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1", limits: { frameBytes: 4096, messageBytes: 100 } });
            return { thrown, errors: errors.map((e) => ({ code: e.code, message: e.message, refused: e.refused?.content.length })), sent: ws.sent.slice(1) };
        });
        expect(out.thrown).toBe("The message is 300,000 bytes; the gateway takes at most 262,144.");
        expect(out.errors).toEqual([
            { code: "limit_exceeded", message: out.thrown, refused: 300_000 },
            { code: "limit_exceeded", message: "The message is 200 bytes; the gateway takes at most 100.", refused: 200 },
        ]);
        // No turn ran: the Stop stops the queued message's (sdk.md, cancel()).
        expect(out.sent).toEqual([{ type: "message", content: "short", id: expect.any(String) }, { type: "cancel" }]);
    });

    test("without limits in session.opened the last ones hold; without frameBytes, frames are not bounded", async ({ page }) => {
        const out = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            const w = window as any;
            const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 5, maxDelay: 5 } });
            await w.until(() => w.FakeSocket.sockets.length === 1);
            let ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0 });
            const none = client.limits;
            ws.drop();
            await w.until(() => w.FakeSocket.sockets.length === 2);
            ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0, limits: { messageBytes: 10 } });
            return { none, noFrame: client.limits };
        });
        expect(out.none).toEqual({ frameBytes: 1048576, messageBytes: 262144 });
        expect(out.noFrame).toEqual({ frameBytes: Infinity, messageBytes: 10 });
    });

    test("a tool answer over frameBytes becomes a terminal tool.error, also when a reconnect lowers the limit", async ({ page }) => {
        const out = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            const w = window as any;
            let runs = 0;
            const client = connect({
                WebSocket: w.FakeSocket,
                storage: null,
                reconnect: { initialDelay: 5, maxDelay: 5 },
                tools: { big: () => "x".repeat(5000), medium: () => { runs++; return "m".repeat(1500); } },
            });
            await w.until(() => w.FakeSocket.sockets.length === 1);
            let ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1", limits: { frameBytes: 2000, messageBytes: 100 } });
            const call = (id: string, name: string) => ({
                type: "tool.call", id, name, arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 3, deadline: "2030-01-01T00:00:00.000Z",
            });
            ws.push(call("c1", "big"));
            ws.push(call("c2", "medium"));
            await w.until(() => ws.sent.length === 3);
            const first = ws.sent.slice(1);
            // Both answers went; the connection drops, and the next gateway
            // reads smaller frames. The answers go again (the replay says
            // neither call settled), c2's too large now.
            ws.drop();
            await w.until(() => w.FakeSocket.sockets.length === 2);
            ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p2", limits: { frameBytes: 1000, messageBytes: 100 } });
            ws.push(call("c2", "medium")); // delivered again: answered already, not run
            await w.until(() => ws.sent.length === 3);
            await w.sleep(20);
            return { first, again: ws.sent.slice(1), runs, cards: client.cards };
        });
        expect(out.first[0]).toEqual({
            type: "tool.error", id: "c1", attempt: 1, code: "tool_failed", retryable: false,
            error: "The tool's result was 5,056 bytes, over the gateway's limit of 2,000 bytes per frame, so the page did not send it.",
            detail: { bytes: 5056, limit: 2000 },
        });
        expect(out.first[1]).toEqual({ type: "tool.result", id: "c2", attempt: 1, result: "m".repeat(1500) });
        expect(out.again).toEqual([out.first[0], {
            type: "tool.error", id: "c2", attempt: 1, code: "tool_failed", retryable: false,
            error: "The tool's result was 1,556 bytes, over the gateway's limit of 1,000 bytes per frame, so the page did not send it.",
            detail: { bytes: 1556, limit: 1000 },
        }]);
        expect(out.runs).toBe(1);
        expect(out.cards.map((c: any) => c.localState)).toEqual(["answered", "answered"]);
    });
});
