// Durable sessions: the gateway process stops (SIGTERM, or SIGKILL with no
// chance to save anything) while a confirm waits in the page, and starts again
// on the same --data-dir and port. The page's SDK reconnects by itself,
// resumes the same session (its cookie still names the same browser), and the
// waiting call is delivered again with its original deadline: the user
// approves once, and the call settles once. The list of chats lists it
// before and after.
//
// Each test runs its own gateway, a child process on a free port with a fresh
// data directory, so it never touches the shared gateways of
// playwright.config.ts. The spec runs in the "demo" project, but ignores its
// baseURL.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test as base, Chat, ofType, replayFromGateway, type Frame } from "./support";

const BINARY = fileURLToPath(new URL("../bin/gateway", import.meta.url));
const ROOT = fileURLToPath(new URL("..", import.meta.url));

const CONFIRM = "delete my draft";
const ASK = "I'll ask you first.";
const REPLY = "Okay, I deleted your draft.";

/** A port nobody listens on right now: the kernel's pick for port 0. */
async function freePort(): Promise<number> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", resolve);
    });
    const { port } = server.address() as net.AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    return port;
}

/** The exit of one gateway process. */
type Exit = { code: number | null; signal: NodeJS.Signals | null; ms: number };

/**
 * One gateway on a fixed port and data directory, which the test stops and
 * starts again. Its output, every run's, is kept for the report.
 */
class Gateway {
    private child?: ChildProcess;
    private runs = 0;
    readonly output: string[] = [];

    constructor(readonly port: number, readonly dataDir: string) {}

    get url(): string {
        return `http://127.0.0.1:${this.port}`;
    }

    /** Starts the binary and waits until /healthz answers 200. Returns how long that took. */
    async start(): Promise<number> {
        expect(this.running(), "a gateway is already running").toBe(false);
        const run = ++this.runs;
        const began = Date.now();
        const child = spawn(
            BINARY,
            ["--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, "--log-level", "warn"],
            { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
        );
        this.child = child;
        for (const [name, stream] of [["stdout", child.stdout!], ["stderr", child.stderr!]] as const) {
            stream.setEncoding("utf8");
            stream.on("data", (text: string) => {
                for (const line of text.split("\n")) if (line) this.output.push(`[run ${run} ${name}] ${line}`);
            });
        }
        let spawnError: Error | undefined;
        child.on("error", (e) => (spawnError = e));
        const deadline = began + 20_000;
        for (;;) {
            if (spawnError) throw new Error(`gateway run ${run} did not start: ${spawnError.message}`);
            if (!this.running()) {
                throw new Error(`gateway run ${run} exited (code ${child.exitCode}, signal ${child.signalCode}) before /healthz answered:\n${this.output.join("\n")}`);
            }
            try {
                const res = await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(1000) });
                if (res.ok) return Date.now() - began;
            } catch { /* not listening yet */ }
            if (Date.now() > deadline) throw new Error(`gateway run ${run}: /healthz did not answer within 20 s:\n${this.output.join("\n")}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
        }
    }

    /** Sends signal and waits for the process to exit (at most timeout ms). */
    async stop(signal: NodeJS.Signals, timeout = 15_000): Promise<Exit> {
        const child = this.child!;
        const began = Date.now();
        const exited = this.exited(child);
        child.kill(signal);
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`gateway did not exit within ${timeout} ms of ${signal}`)), timeout);
        });
        try {
            const { code, signal: by } = await Promise.race([exited, late]);
            return { code, signal: by, ms: Date.now() - began };
        } finally {
            clearTimeout(timer);
        }
    }

    /** Kills whatever still runs, and waits for it: the fixture's cleanup. */
    async kill() {
        if (this.child && this.running()) {
            const exited = this.exited(this.child);
            this.child.kill("SIGKILL");
            await exited;
        }
    }

    private running(): boolean {
        return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
    }

    private exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
        if (child.exitCode !== null || child.signalCode !== null) {
            return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
        }
        return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    }
}

/**
 * Chromium logs each refused WebSocket connection as a console error; while
 * the gateway is down, those are expected. Anything else still fails the test.
 */
const refused = (port: number) =>
    new RegExp(`console\\.error: WebSocket connection to 'ws://127\\.0\\.0\\.1:${port}/ws' failed: .*net::ERR_CONNECTION_REFUSED$`);

const test = base.extend<{ gateway: Gateway }>({
    gateway: async ({}, use, testInfo) => {
        const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "gateway-restart-"));
        const gateway = new Gateway(await freePort(), dataDir);
        try {
            await use(gateway);
        } finally {
            await gateway.kill();
            await fs.rm(dataDir, { recursive: true, force: true });
            await testInfo.attach("gateway output", { body: gateway.output.join("\n") || "(none)", contentType: "text/plain" });
        }
    },
});

/** The tool.call deliveries of id among frames. */
const calls = (frames: Frame[], id: string) => frames.filter((f) => f.type === "tool.call" && f.id === id);

for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    test(`the gateway restarts (${signal}) while confirm waits: the page resumes, and the call settles once`, async ({ page, gateway, pageErrors }) => {
        test.setTimeout(90_000);
        const note = (type: string, description: string) => test.info().annotations.push({ type, description });

        note("first start", `${await gateway.start()} ms to /healthz`);
        const chat = await Chat.open(page, `${gateway.url}/`);
        await page.evaluate(() => {
            const w = window as any;
            w.__states = [];
            w.__resets = [];
            w.gatewayClient.on("state", (s: any) => w.__states.push({ ...s, at: Date.now() }));
            w.gatewayClient.on("reset", (r: any) => w.__resets.push(r));
        });
        await chat.recordFrames();
        const session = await chat.session();

        await chat.send(CONFIRM);
        const card = chat.cards("confirm");
        await expect(card.getByTestId("confirm-approve")).toBeVisible();
        await expect(card.getByTestId("confirm-question")).toHaveText("Delete your draft?");
        await expect(chat.reply(ASK)).toHaveCount(1);
        // The chat is listed by its first message before the restart (and the
        // page is done asking for the list).
        const items = page.getByTestId("history-item");
        await expect(items).toHaveText([CONFIRM]);
        const id = (await card.getAttribute("data-tool-id"))!;
        const first = calls(await chat.received(), id);
        expect(first, "tool.call deliveries before the restart").toHaveLength(1);
        expect(first[0]).toMatchObject({ attempt: 1 });
        const deadline = first[0].deadline as string;
        const deliveredAt = Date.now();

        // Stop the gateway and wait for the process to end.
        const exit = await gateway.stop(signal);
        note(`${signal} exit`, `${exit.ms} ms (code ${exit.code}, signal ${exit.signal})`);
        if (signal === "SIGKILL") expect(exit.signal).toBe("SIGKILL");
        else expect(exit, "a clean exit on SIGTERM").toMatchObject({ code: 0 });

        // The page says it is reconnecting while nobody listens.
        const status = page.getByTestId("connection-status");
        await expect(status).toHaveAttribute("data-state", /^(closed|connecting)$/);
        await expect(status).toHaveText(/^(Offline, retrying in \d+s|Offline|Connecting…)$/);
        note("while down", `${await status.getAttribute("data-state")}: ${await status.textContent()}`);
        // The question stays on screen: a dropped socket does not abort it.
        await expect(card.getByTestId("confirm-approve")).toBeEnabled();

        // Again, on the same port and data directory.
        note("second start", `${await gateway.start()} ms to /healthz`);
        const upAt = Date.now();
        await expect(status).toHaveAttribute("data-state", "open", { timeout: 15_000 });
        await expect(status).toHaveText("Connected");
        note("reconnected", `${Date.now() - upAt} ms after /healthz answered`);

        const states: { state: string; code?: number }[] = await page.evaluate(() => (window as any).__states);
        expect(states[0], "the first state after the stop").toMatchObject({ state: "closed" });
        expect(states.at(-1), "the last state").toMatchObject({ state: "open" });
        expect(states.filter((s) => s.state === "open"), "one reconnection").toHaveLength(1);
        note("states", states.map((s) => (s.code ? `${s.state}(${s.code})` : s.state)).join(" → "));

        // The same session and conversation: nothing was reset, nothing doubled.
        expect(await page.evaluate(() => (window as any).__resets), "reset events").toEqual([]);
        expect(await chat.session()).toBe(session);
        await expect(chat.messages("user").getByTestId("message-text")).toHaveText([CONFIRM]);
        await expect(chat.reply(ASK)).toHaveCount(1);
        await expect(chat.messages("assistant")).toHaveCount(1);
        await expect(card).toHaveCount(1);
        await expect(card).toHaveAttribute("data-tool-id", id);
        // The list of chats survives too: the restarted gateway still knows
        // the browser (its cookie) and lists its chat, the one shown.
        await expect(items).toHaveText([CONFIRM]);
        await expect(items.first()).toHaveAttribute("data-session", session);
        await expect(items.first()).toHaveAttribute("aria-current", "true");
        await expect(page.getByTestId("empty-chat")).toBeHidden();

        // The waiting call is delivered again, same attempt, same deadline,
        // and the page keeps asking its one question.
        await expect.poll(async () => calls(await chat.received(), id).length, { message: "tool.call deliveries" }).toBe(2);
        const again = calls(await chat.received(), id)[1];
        expect(again).toMatchObject({ attempt: 1, deadline });
        await expect(card).toHaveAttribute("data-status", "running");
        await expect(card).toHaveAttribute("data-where", "here");
        await expect(card.getByTestId("confirm")).toHaveCount(1);
        await expect(card.getByTestId("confirm-approve")).toBeVisible();
        // Still inside the call's 30 s: the restart did not eat the deadline.
        expect(Date.parse(deadline), "the deadline is still ahead").toBeGreaterThan(Date.now());
        note("restart took", `${Date.now() - deliveredAt} ms of the call's deadline`);

        await card.getByTestId("confirm-approve").click();
        await expect(chat.reply(REPLY)).toBeVisible();
        await expect(card).toHaveAttribute("data-status", "done");
        await expect(card.getByTestId("confirm-answer")).toHaveText("You approved.");
        await expect(card.getByTestId("confirm-approve")).toBeDisabled();
        await chat.idle();
        await expect(chat.reply(REPLY)).toHaveCount(1);

        const answers = (await chat.sent()).filter((f) => f.id === id);
        expect(answers, "the page's answers").toEqual([{ type: "tool.result", id, attempt: 1, result: { approved: true } }]);
        expect((await chat.received()).filter((f) => f.type === "tool.cancel"), "tool.cancel frames").toEqual([]);

        // Exactly once, in the page's events and in the restarted gateway's own record.
        const events = await chat.events();
        expect(events.map((e) => e.seq), "seqs without gaps or repeats").toEqual(events.map((_, i) => i + 1));
        for (const [where, record] of [["page", events], ["gateway", await replayFromGateway(page, session)]] as const) {
            const finished = ofType(record, "tool.finished", id);
            expect(finished, `tool.finished (${where})`).toHaveLength(1);
            expect(finished[0], `tool.finished (${where})`).toMatchObject({ ok: true });
            expect(ofType(record, "tool.started", id), `tool.started (${where})`).toHaveLength(1);
            expect(ofType(record, "tool.retrying", id), `tool.retrying (${where})`).toHaveLength(0);
            const messages = ofType(record, "message").map((e) => e.message);
            expect(messages.filter((m) => m.role === "user").map((m) => m.content), `user messages (${where})`).toEqual([CONFIRM]);
            expect(messages.filter((m) => m.content === ASK), `"${ASK}" (${where})`).toHaveLength(1);
            expect(messages.filter((m) => m.role === "tool" && m.toolUseId === id), `tool messages (${where})`).toHaveLength(1);
            expect(messages.filter((m) => m.content === REPLY), `"${REPLY}" (${where})`).toHaveLength(1);
        }
        expect(await replayFromGateway(page, session), "the gateway's record is the page's").toEqual(events);

        // Close the page while its gateway still runs; then only the refused
        // connections of the downtime may be in its console.
        await page.close();
        const expected = refused(gateway.port);
        note("refused connections logged", String(pageErrors.filter((e) => expected.test(e)).length));
        pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !expected.test(e)));
    });
}
