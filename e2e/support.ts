// Helpers shared by the specs: a page object for the chat page (by its
// data-testid attributes, see docs/ui.md) and a look at what the gateway and
// the model saw. The fault injection, the fake WebSocket and the gateway's
// record of a session come from the test kit (testkit/, docs/testing.md),
// the same one a user's suite imports.
import { test as base, expect, type ConsoleMessage, type Locator, type Page } from "@playwright/test";
import { attachWire, installFakeSocket, replay, type Wire } from "../testkit/index.js";

export { attachWire, installFakeSocket, type Wire };

/**
 * Playwright's test, plus a check that no page of the test threw an uncaught
 * error or logged a console error (a 404 for an asset, a broken module).
 */
export const test = base.extend<{ pageErrors: string[] }>({
    pageErrors: [
        async ({ context }, use) => {
            const errors: string[] = [];
            const watch = (p: Page) => {
                p.on("pageerror", (e) => errors.push(`${p.url()}: uncaught ${e.name}: ${e.message}`));
                p.on("console", (m) => {
                    if (m.type() === "error") errors.push(`${p.url()}: console.error: ${m.text()}`);
                });
            };
            context.pages().forEach(watch);
            context.on("page", watch);
            await use(errors);
            expect(errors, "errors in the page").toEqual([]);
        },
        { auto: true },
    ],
});
export { expect };

/** The pages whose WebSocket is the fake already (openOnFakeSocket adds it once). */
const replacedWebSocket = new WeakSet<Page>();

/**
 * A test whose page is one page a worker, with the fake WebSocket in it
 * (window.FakeSocket; with replaceWebSocket, window.WebSocket too), navigated
 * to /healthz afresh for each test, its storage cleared: the navigation ends
 * the last test's clients and timers. For the specs that play the gateway
 * frame by frame, a browser context of their own for each was most of their
 * time. No page clock, no viewport or media of a test's own, no listener
 * left on the page: a spec that needs one takes `test`.
 */
function sharedPageTest(fake: { replaceWebSocket?: boolean }) {
    return base.extend<{ pageErrors: string[] }, { sharedPage: Page }>({
        sharedPage: [
            async ({ browser }, use, workerInfo) => {
                const context = await browser.newContext({ baseURL: workerInfo.project.use.baseURL });
                const page = await context.newPage();
                await installFakeSocket(page, fake);
                if (fake.replaceWebSocket) replacedWebSocket.add(page);
                await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
                await use(page);
                await context.close();
            },
            { scope: "worker" },
        ],
        page: async ({ sharedPage }, use) => {
            await sharedPage.goto("/healthz");
            await sharedPage.evaluate(() => { sessionStorage.clear(); localStorage.clear(); });
            await use(sharedPage);
        },
        pageErrors: [
            async ({ page }, use) => {
                const errors: string[] = [];
                const pageerror = (e: Error) => errors.push(`uncaught ${e.name}: ${e.message}`);
                const logged = (m: ConsoleMessage) => { if (m.type() === "error") errors.push(`console.error: ${m.text()}`); };
                page.on("pageerror", pageerror);
                page.on("console", logged);
                await use(errors);
                page.off("pageerror", pageerror);
                page.off("console", logged);
                expect(errors, "errors in the page").toEqual([]);
            },
            { auto: true },
        ],
    });
}

/** The SDK's specs: any page of the gateway's origin will do, as the SDK is imported from /static/. */
export const sdkTest = sharedPageTest({});

/** The chat page's specs on the fake socket: openOnFakeSocket then opens the page there. */
export const fakeChatTest = sharedPageTest({ replaceWebSocket: true });

/** A session event as the gateway sent it (docs/protocol.md). */
export type Frame = { type: string; seq?: number; [field: string]: any };

/** The SDK's default sessionStorage key. */
export const STORAGE_KEY = "gateway.session";

export class Chat {
    constructor(readonly page: Page) {}

    /**
     * Opens the chat page and waits until the session is open. url: the
     * page's address, relative to the project's baseURL or absolute (another
     * origin of the same gateway, such as a proxy in front of it).
     */
    static async open(page: Page, url = "/"): Promise<Chat> {
        const chat = new Chat(page);
        await page.goto(url);
        await chat.connected();
        return chat;
    }

    /**
     * Opens the chat page as another tab of session: page (a new page of the
     * same context, so the same cookie) starts with {"session": id} in its
     * sessionStorage, as a duplicated tab does, and resumes it.
     */
    static async join(page: Page, session: string, url = "/"): Promise<Chat> {
        await page.addInitScript(([key, session]) => {
            if (!sessionStorage.getItem(key)) sessionStorage.setItem(key, JSON.stringify({ session }));
        }, [STORAGE_KEY, session]);
        const chat = await Chat.open(page, url);
        expect(await chat.session(), "the tab joined the session").toBe(session);
        return chat;
    }

    async connected() {
        await expect(this.page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");
    }

    /** Types text and presses Enter, as a user does. */
    async send(text: string) {
        const prompt = this.page.getByTestId("prompt");
        await prompt.fill(text);
        await prompt.press("Enter");
        await expect(prompt).toHaveValue("");
    }

    /** Waits for the session to go idle after a turn. */
    async idle() {
        await expect(this.page.locator("[data-chat]")).toHaveAttribute("data-busy", "false");
    }

    messages(role?: "user" | "assistant"): Locator {
        const all = this.page.getByTestId("message");
        return role ? all.and(this.page.locator(`[data-role="${role}"]`)) : all;
    }

    /** The assistant message that contains text. */
    reply(text: string | RegExp): Locator {
        return this.messages("assistant").filter({ hasText: text });
    }

    cards(name?: string): Locator {
        return name
            ? this.page.locator(`[data-testid="tool-card"][data-tool-name="${name}"]`)
            : this.page.getByTestId("tool-card");
    }

    /** Every session event this page's SDK has seen, deduplicated. */
    async events(): Promise<Frame[]> {
        return this.page.evaluate(() => (window as any).gatewayClient.events);
    }

    /** The tool messages of the transcript: exactly what the model was given. */
    async toolMessages(name?: string): Promise<{ content: string; isError?: boolean; name?: string; toolUseId?: string }[]> {
        const events = await this.events();
        return events
            .filter((e) => e.type === "message" && e.message?.role === "tool" && (!name || e.message.name === name))
            .map((e) => e.message);
    }

    async session(): Promise<string> {
        return this.page.evaluate(() => (window as any).gatewayClient.session);
    }

    /** This connection's page id (session.opened's page): who holds a lease. */
    async pageId(): Promise<string> {
        return this.page.evaluate(() => (window as any).gatewayClient.page);
    }

    /**
     * Records the frames this page sends and receives from now on, in
     * window.__sent and window.__received.
     */
    async recordFrames() {
        await this.page.evaluate(() => {
            const w = window as any;
            w.__sent = [];
            w.__received = [];
            w.gatewayClient.on("send", (f: any) => w.__sent.push(f));
            w.gatewayClient.on("frame", (f: any) => w.__received.push(f));
        });
    }

    async sent(): Promise<Frame[]> {
        return this.page.evaluate(() => (window as any).__sent ?? []);
    }

    async received(): Promise<Frame[]> {
        return this.page.evaluate(() => (window as any).__received ?? []);
    }
}

/**
 * Every event the gateway replays of session (after 0) to a second,
 * tool-less connection from page's origin: the gateway's own record of the
 * session, independent of what any page rendered. The test kit's replay.
 */
export const replayFromGateway = (page: Page, session: string): Promise<Frame[]> => replay(page, session);

/**
 * Where what scrolls the conversation is: the page in a window under 30rem
 * tall (the log's overflow is visible there), else the log. top: its
 * scrollTop; below: how far it is from its bottom.
 */
export const scrolled = (page: Page): Promise<{ top: number; below: number }> => page.evaluate(() => {
    const log = document.querySelector<HTMLElement>("[data-testid=messages]")!;
    const s = getComputedStyle(log).overflowY === "visible" ? document.scrollingElement! : log;
    return { top: s.scrollTop, below: s.scrollHeight - s.scrollTop - s.clientHeight };
});

/** The events of type in frames, optionally for one tool call id. */
export function ofType(frames: Frame[], type: string, id?: string): Frame[] {
    return frames.filter((f) => f.type === type && (id === undefined || f.id === id));
}

/**
 * The chat page on the test kit's fake socket, its session s1 open: the spec
 * plays the gateway's side from there (FakeSocket.last()).
 */
export async function openOnFakeSocket(page: Page) {
    if (!replacedWebSocket.has(page)) {
        await installFakeSocket(page, { replaceWebSocket: true });
        replacedWebSocket.add(page);
    }
    await page.goto("/");
    await page.evaluate(async () => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === 1);
        w.FakeSocket.last().accept();
        w.FakeSocket.last().push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
    });
    await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");
}
