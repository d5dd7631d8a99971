// The SDK (static/gateway.js) against a fake WebSocket: each spec plays the
// gateway's side frame by frame, to pin down what the SDK sends and emits in
// the cases the real gateway makes hard to stage (duplicate deliveries,
// drops, replays that overlap what the page has seen).
import type { Page } from "@playwright/test";
import { expect, test, sdkTest, installFakeSocket } from "./support";

sdkTest("the first frame is session.open with the tool names; the session is stored", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage();
        const states: string[] = [];
        const client = connect({ url: "/ws", WebSocket: w.FakeSocket, storage, tools: { a: { run: () => 1 }, b: () => 2 } });
        client.on("state", ({ state }: any) => states.push(state));
        const idles: any[] = [];
        client.on("idle", (d: any) => idles.push(d));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        const first = ws.sent[0];
        // A new session's start: its first events were never shown, so not replayed.
        ws.push({ type: "session.opened", session: "s1", seq: 1 });
        ws.push({ type: "session.idle", seq: 1 });
        return { url: ws.url, first, states, idles, session: client.session, stored: JSON.parse(storage.getItem("gateway.session")) };
    });
    expect(out.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/ws$/);
    expect(out.first).toEqual({ type: "session.open", tools: ["a", "b"] });
    expect(out.states).toEqual(["connecting", "open"]);
    expect(out.idles).toEqual([{ seq: 1, replayed: false }]);
    expect(out.session).toBe("s1");
    expect(out.stored).toMatchObject({ session: "s1", seq: 0 });
});

sdkTest("a session over the storage's quota keeps its id, and its whole copy is not tried again while it is as large", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const writes: number[] = []; // the length of each write tried
        const storage = new w.MemoryStorage();
        const set = storage.setItem.bind(storage);
        storage.setItem = (k: string, v: string) => {
            writes.push(v.length);
            if (v.length > 2000) throw new DOMException("quota", "QuotaExceededError");
            set(k, v);
        };
        connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push({ type: "message", seq: 1, message: { role: "tool", content: "x".repeat(3000), toolUseId: "c1", name: "read" } });
        await w.sleep(120);
        const whole = writes.filter((n) => n > 2000).length;
        for (let seq = 2; seq < 12; seq++) {
            ws.push({ type: "model.delta", seq, text: "more" });
            await w.sleep(60); // a write each
        }
        return { whole, wholeAfter: writes.filter((n) => n > 2000).length, writes: writes.length, stored: JSON.parse(storage.getItem("gateway.session")) };
    });
    expect(out.whole).toBe(1);
    expect(out.wholeAfter, "the whole copy was tried again as the session grew").toBe(1);
    expect(out.writes).toBeGreaterThan(3);
    expect(out.stored).toMatchObject({ session: "s1", seq: 0, events: [] });
});

sdkTest("a long session's copy is written a chunk at a time, and a reload restores it whole and writes nothing", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const { CHUNK_CHARS } = await import("/static/store.js");
        const w = window as any;
        const storage = new w.MemoryStorage();
        const writes: number[] = [];
        const set = storage.setItem.bind(storage);
        storage.setItem = (k: string, v: string) => {
            writes.push(v.length);
            set(k, v);
        };
        const first = connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, epoch: "e1" });
        // 20 writes of 15 events of about 1 KB: 300 KB in all.
        let seq = 0;
        for (let write = 0; write < 20; write++) {
            for (let i = 0; i < 15; i++) ws.push({ type: "model.delta", seq: ++seq, text: `${seq} `.repeat(250).slice(0, 1000) });
            await w.until(() => JSON.parse(storage.getItem("gateway.session")).seq === seq);
        }
        const events = first.events;
        first.close();
        const largest = Math.max(...writes), total = writes.reduce((a, b) => a + b, 0);
        const copy = [...storage.map.values()].reduce((n: number, v: string) => n + v.length, 0);
        // A reload: another client on the same storage, the same run of the gateway.
        writes.length = 0;
        const second = connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const restored = second.events;
        const again = w.FakeSocket.last();
        again.accept();
        again.push({ type: "session.opened", session: "s1", seq, epoch: "e1" });
        await w.sleep(120);
        second.close();
        return { chunk: CHUNK_CHARS, largest, total, copy, same: JSON.stringify(restored) === JSON.stringify(events), count: restored.length, open: again.sent[0], writes: writes.length };
    });
    expect(out.count).toBe(300);
    expect(out.same).toBe(true);
    expect(out.copy).toBeGreaterThan(4 * out.chunk);
    // Each write put the last chunk and the head, never the whole copy
    // (which, written at each of the 20 writes, made 11 times the copy).
    expect(out.largest).toBeLessThanOrEqual(out.chunk + 1100);
    expect(out.total).toBeLessThan(5 * out.copy);
    expect(out.open).toEqual({ type: "session.open", tools: [], session: "s1", after: 300, epoch: "e1" });
    expect(out.writes, "the restore and the close wrote what was stored").toBe(0);
});

sdkTest("a copy cut for the storage's quota is kept whole again once it fits", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { SessionStore } = await import("/static/store.js");
        const w = window as any;
        const storage = new w.MemoryStorage({ other: "y".repeat(100_000) }, 250_000); // another part of the page's
        const events = Array.from({ length: 200 }, (_, i) => ({ type: "model.delta", seq: i + 1, text: "x".repeat(1000) }));
        const state = { session: "s1", seq: 200, epoch: "e1", events, unsent: [{ type: "message", id: "m1", content: "hi" }] };
        const store = new SessionStore(storage, "k", () => state);
        const stored = () => new SessionStore(storage, "k", () => null).load()!.events.length;
        store.flush();
        const cut = stored();
        storage.removeItem("other"); // room made
        state.unsent = []; // m1 confirmed: the whole copy is tried again, and fits
        store.flush();
        const whole = stored();
        state.unsent = [{ type: "message", id: "m2", content: "again" }]; // the next message
        store.flush();
        return { cut, whole, after: stored() };
    });
    expect(out).toEqual({ cut: 0, whole: 200, after: 200 });
});

sdkTest("a copy that fills the storage part way leaves no chunk behind, only the session's id", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage({}, 150_000);
        const client = connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, epoch: "e1" });
        // 300 KB at once: the first chunks fit, the third does not.
        for (let seq = 1; seq <= 300; seq++) ws.push({ type: "model.delta", seq, text: "x".repeat(1000) });
        await w.until(() => JSON.parse(storage.getItem("gateway.session")).session === "s1");
        client.close();
        return { keys: [...storage.map.keys()], stored: JSON.parse(storage.getItem("gateway.session")) };
    });
    expect(out.keys).toEqual(["gateway.session"]);
    expect(out.stored).toMatchObject({ session: "s1", seq: 0, events: [] });
});

sdkTest("a copy whose chunk is missing, damaged or not the one its head names resumes the session from its start, and a new session removes the old chunks", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        /** The socket start() makes the client open, accepted, once the client sent session.open on it. */
        const opened = async (start: () => any) => {
            const n = w.FakeSocket.sockets.length;
            const client = start();
            await w.until(() => w.FakeSocket.sockets.length > n);
            const ws = w.FakeSocket.last();
            ws.accept();
            await w.until(() => ws.sent.length > 0);
            return Object.assign(ws, { client });
        };
        const head = JSON.stringify({ v: 2, session: "s1", seq: 3, epoch: "e1", chunks: [2, 3], unsent: [] });
        const chunk = JSON.stringify({ session: "s1", events: [{ type: "model.delta", seq: 1, text: "a" }, { type: "model.delta", seq: 2, text: "b" }] });
        const third = [{ type: "model.delta", seq: 3, text: "c" }];
        const opens = [];
        // The second chunk missing, not JSON, with no events, out of order,
        // another session's, ending elsewhere; the first ending elsewhere
        // (another writer on the key: its events are in order, and miss one).
        const cases = [null, "not JSON", JSON.stringify({ session: "s1", events: [] }), JSON.stringify({ session: "s1", events: [{ type: "model.delta", seq: 1, text: "c" }] }),
            JSON.stringify({ session: "s0", events: third }), JSON.stringify({ session: "s1", events: [...third, { type: "model.delta", seq: 4, text: "d" }] })]
            .map((second) => [chunk, second]);
        cases.push([JSON.stringify({ session: "s1", events: [{ type: "model.delta", seq: 1, text: "a" }] }), JSON.stringify({ session: "s1", events: third })]);
        for (const [first, second] of cases) {
            const storage = new w.MemoryStorage({ "gateway.session": head, "gateway.session#1": first, ...(second !== null && { "gateway.session#2": second }) });
            const ws = await opened(() => connect({ WebSocket: w.FakeSocket, storage }));
            ws.client.close();
            opens.push({ open: ws.sent[0], events: ws.client.events.length, keys: [...storage.map.keys()] });
        }
        // A whole copy of three events; then New chat.
        const storage = new w.MemoryStorage({
            "gateway.session": head, "gateway.session#1": chunk,
            "gateway.session#2": JSON.stringify({ session: "s1", events: third }),
        });
        const ws = await opened(() => connect({ WebSocket: w.FakeSocket, storage }));
        const client = ws.client;
        const restored = client.events.length;
        ws.push({ type: "session.opened", session: "s1", seq: 3, epoch: "e1" });
        const fresh = await opened(() => (client.reset(), client)); // New chat: a new socket
        fresh.push({ type: "session.opened", session: "s2", seq: 0, epoch: "e1" });
        fresh.push({ type: "model.delta", seq: 1, text: "new" });
        await w.until(() => JSON.parse(storage.getItem("gateway.session")).session === "s2");
        client.close();
        // A head of the first version over a chunked copy (a page of an
        // earlier version wrote it): the chunks go with the next write.
        const old = new w.MemoryStorage({
            "gateway.session": JSON.stringify({ v: 1, session: "s1", seq: 0, events: [] }),
            "gateway.session#1": chunk, "gateway.session#2": JSON.stringify({ session: "s1", events: third }),
        });
        const again = await opened(() => connect({ WebSocket: w.FakeSocket, storage: old }));
        again.push({ type: "session.opened", session: "s1", seq: 0, epoch: "e1" });
        again.client.close();
        return { opens, restored, keys: [...storage.map.keys()].sort(), oldKeys: [...old.map.keys()] };
    });
    // Its copy is then the session's id alone.
    expect(out.opens).toEqual(Array(7).fill({ open: { type: "session.open", tools: [], session: "s1", after: 0 }, events: 0, keys: ["gateway.session"] }));
    expect(out.restored).toBe(3);
    expect(out.keys).toEqual(["gateway.session", "gateway.session#1"]);
    expect(out.oldKeys).toEqual(["gateway.session"]);
});

sdkTest("a reload restores the stored events and resumes after the last seq", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const events = [
            { type: "message", seq: 1, message: { role: "user", content: "hi" } },
            { type: "model.delta", seq: 2, text: "Hel" },
            { type: "model.delta", seq: 3, text: "lo" },
        ];
        const storage = new w.MemoryStorage({ "my.key": JSON.stringify({ v: 1, session: "s1", seq: 3, events }) });
        const seen: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage, storageKey: "my.key" });
        for (const t of ["message", "delta", "model.finished"]) client.on(t, (d: any) => seen.push({ t, ...d }));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 4 });
        ws.push({ type: "model.delta", seq: 3, text: "lo" }); // overlap: already seen
        ws.push({ type: "model.finished", seq: 4, stopReason: "end_turn" });
        ws.push({ type: "model.delta", seq: 4, text: "again" }); // duplicate seq
        return { first: ws.sent[0], seen, seq: client.seq };
    });
    expect(out.first).toEqual({ type: "session.open", tools: [], session: "s1", after: 3 });
    expect(out.seen.map((e) => [e.t, e.seq, e.replayed])).toEqual([
        ["message", 1, true],
        ["delta", 2, true],
        ["delta", 3, true],
        ["model.finished", 4, true], // part of the resume's replay (seq <= opened.seq)
    ]);
    expect(out.seq).toBe(4);
});

sdkTest("reconnects with capped exponential backoff and emits every event once", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const deltas: string[] = [];
        const states: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 40, maxDelay: 160, factor: 2 } });
        client.on("delta", ({ text }: any) => deltas.push(text));
        client.on("state", (s: any) => states.push(s));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push({ type: "model.delta", seq: 1, text: "a" });
        ws.push({ type: "model.delta", seq: 2, text: "b" });
        // Five failed tries, then one that works.
        for (let i = 0; i < 5; i++) {
            const n = w.FakeSocket.sockets.length;
            w.FakeSocket.last().drop();
            await w.until(() => w.FakeSocket.sockets.length === n + 1);
        }
        ws = w.FakeSocket.last();
        ws.accept();
        const resume = ws.sent[0];
        ws.push({ type: "session.opened", session: "s1", seq: 3 });
        ws.push({ type: "model.delta", seq: 1, text: "a" });
        ws.push({ type: "model.delta", seq: 2, text: "b" });
        ws.push({ type: "model.delta", seq: 3, text: "c" });
        const s = w.FakeSocket.sockets;
        const gaps = s.slice(1).map((x: any, i: number) => x.createdAt - s[i].createdAt);
        return { deltas, resume, gaps, retryIn: states.filter((x) => x.retryIn !== undefined).map((x) => x.retryIn) };
    });
    expect(out.deltas).toEqual(["a", "b", "c"]);
    expect(out.resume).toEqual({ type: "session.open", tools: [], session: "s1", after: 2 });
    // ceilings 40, 80, 160, 160, 160 (capped); each wait is between half the ceiling and all of it.
    const ceilings = [40, 80, 160, 160, 160];
    out.retryIn.forEach((d: number, i: number) => {
        expect(d).toBeGreaterThanOrEqual(ceilings[i] / 2);
        expect(d).toBeLessThanOrEqual(ceilings[i]);
    });
    out.gaps.slice(1).forEach((g: number, i: number) => expect(g).toBeGreaterThanOrEqual(out.retryIn[i + 1] - 5));
});

sdkTest("a tool call runs once per (id, attempt); a redelivery resends the answer", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        let runs = 0;
        let release: (v: any) => void = () => {};
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            reconnect: { initialDelay: 10, maxDelay: 10 },
            tools: {
                lookup: {
                    run: (input: any, ctx: any) => {
                        runs++;
                        return new Promise((r) => { release = () => r({ found: input.key, attempt: ctx.attempt, of: ctx.attempts, deadline: ctx.deadline.toISOString() }); });
                    },
                },
            },
        });
        const cards: any[] = [];
        client.on("tool", (c: any) => cards.push(c));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        const call = {
            type: "tool.call", id: "c1", name: "lookup", arguments: '{"key":"k"}',
            input: { status: "valid", value: { key: "k" } }, attempt: 1, attempts: 3, deadline: "2030-01-01T00:00:00.000Z",
        };
        ws.push(call);
        ws.push(call); // duplicate while running: ignored
        await w.sleep(10);
        release(undefined);
        await w.until(() => ws.sent.length === 2);
        ws.push(call); // duplicate on the same connection after answering: nothing to do
        await w.sleep(10);
        const firstConn = ws.sent.slice(1);
        // The connection drops; the gateway delivers the same attempt again.
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push(call);
        await w.until(() => ws.sent.length === 2);
        return { runs, firstConn, secondConn: ws.sent.slice(1), local: cards.at(-1) };
    });
    expect(out.runs).toBe(1);
    const answer = { type: "tool.result", id: "c1", attempt: 1, result: { found: "k", attempt: 1, of: 3, deadline: "2030-01-01T00:00:00.000Z" } };
    expect(out.firstConn).toEqual([answer]);
    expect(out.secondConn).toEqual([answer]);
    expect(out.local).toMatchObject({ id: "c1", name: "lookup", local: true, localState: "answered", attempt: 1, attempts: 3 });
});

sdkTest("tool.cancel aborts the signal and nothing is answered", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        let reason: any = null;
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            tools: {
                slow: (_: any, { signal }: any) => new Promise((_r, reject) => signal.addEventListener("abort", () => { reason = signal.reason; reject(signal.reason); })),
            },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push({ type: "tool.call", id: "c1", name: "slow", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "" });
        await w.sleep(0); // the tool runs
        ws.push({ type: "tool.cancel", id: "c1", attempt: 1, reason: "timeout" });
        await w.sleep(30);
        return { sent: ws.sent.slice(1), name: reason?.name, card: client.cards[0] };
    });
    expect(out.sent).toEqual([]);
    expect(out.name).toBe("TimeoutError");
    expect(out.card.localState).toBe("cancelled");
});

sdkTest("bad input is answered with proposed unless the tool accepts it; errors become tool.error", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect, ToolError } = await import("/static/gateway.js");
        const w = window as any;
        const ran: string[] = [];
        connect({
            WebSocket: w.FakeSocket,
            storage: null,
            tools: {
                strict: () => { ran.push("strict"); return 1; },
                lenient: { acceptInvalid: true, run: (input: any) => { ran.push("lenient"); return { got: input ?? null }; } },
                throws: () => { throw new Error("boom"); },
                rejects: async () => { throw new ToolError("try later", { retryable: true, code: "tool_failed", detail: { n: 1 } }); },
                nothing: () => undefined,
                cyclic: () => { const o: any = {}; o.o = o; return o; },
                madeUpCode: () => { throw new ToolError("busy", { code: "busy" }); },
                codeSetLater: () => { const e: any = new ToolError("busy"); e.code = "busy"; throw e; },
                saysNothing: () => { throw new Error(); },
            },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        const base = { type: "tool.call", attempts: 1, deadline: "" };
        const proposed = { type: "tool.error", error: "city is required", code: "invalid_input" };
        ws.push({ ...base, id: "1", attempt: 1, name: "strict", arguments: '{"town":"x"}', input: { status: "invalid", value: { town: "x" }, error: "city is required" }, proposed });
        ws.push({ ...base, id: "2", attempt: 2, name: "strict", arguments: "{", input: { status: "malformed", error: "unexpected end" } });
        ws.push({ ...base, id: "3", attempt: 1, name: "lenient", arguments: '{"town":"x"}', input: { status: "invalid", value: { town: "x" }, error: "e" }, proposed });
        ws.push({ ...base, id: "4", attempt: 1, name: "throws", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "5", attempt: 1, name: "rejects", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "6", attempt: 1, name: "nothing", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "7", attempt: 1, name: "missing", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "8", attempt: 1, name: "cyclic", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "9", attempt: 1, name: "madeUpCode", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "10", attempt: 1, name: "codeSetLater", arguments: "{}", input: { status: "valid", value: {} } });
        ws.push({ ...base, id: "11", attempt: 1, name: "saysNothing", arguments: "{}", input: { status: "valid", value: {} } });
        await w.until(() => ws.sent.length === 12);
        const byId = Object.fromEntries(ws.sent.slice(1).map((f: any) => [f.id, f]));
        return { ran, byId };
    });
    expect(out.ran).toEqual(["lenient"]);
    expect(out.byId["1"]).toEqual({ type: "tool.error", error: "city is required", code: "invalid_input", id: "1", attempt: 1 });
    expect(out.byId["2"]).toEqual({ type: "tool.error", error: "unexpected end", code: "malformed_input", id: "2", attempt: 2 });
    expect(out.byId["3"]).toEqual({ type: "tool.result", id: "3", attempt: 1, result: { got: { town: "x" } } });
    expect(out.byId["4"]).toEqual({ type: "tool.error", id: "4", attempt: 1, error: "boom" });
    expect(out.byId["5"]).toEqual({ type: "tool.error", id: "5", attempt: 1, error: "try later", retryable: true, code: "tool_failed", detail: { n: 1 } });
    expect(out.byId["6"]).toEqual({ type: "tool.result", id: "6", attempt: 1, result: null });
    expect(out.byId["7"]).toMatchObject({ type: "tool.error", code: "unknown_tool" });
    expect(out.byId["8"]).toMatchObject({ type: "tool.error", code: "tool_failed" });
    // A code the gateway would refuse never leaves the page: the call fails now, saying why,
    // or, set after the constructor, the code is left out (tool_failed).
    expect(out.byId["9"]).toEqual({ type: "tool.error", id: "9", attempt: 1, error: `ToolError code "busy" is not one of TOOL_ERROR's (codes.js); leave it out for tool_failed` });
    expect(out.byId["10"]).toEqual({ type: "tool.error", id: "10", attempt: 1, error: "busy" });
    // new Error() says nothing, and the gateway tells the model so (protocol.md).
    expect(out.byId["11"]).toEqual({ type: "tool.error", id: "11", attempt: 1, error: "" });
});

sdkTest("messages, cancel and answers wait for the session while offline", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        let answer: (v: any) => void = () => {};
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            reconnect: { initialDelay: 20, maxDelay: 20 },
            tools: { ask: () => new Promise((r) => { answer = r; }) },
        });
        client.send("queued before open");
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        const first = ws.sent.slice(1);
        ws.push({ type: "message.taken", id: first[0].id });
        ws.push({ type: "message", seq: 1, message: { role: "user", content: "queued before open" } }); // its turn runs
        ws.push({ type: "tool.call", id: "c1", name: "ask", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "" });
        await w.sleep(0); // the tool runs
        ws.drop();
        answer("yes"); // finishes while offline
        client.send("typed offline");
        client.cancel();
        client.cancel(); // one cancel is enough
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 1 });
        return { first, second: ws.sent.slice(1) };
    });
    expect(out.first).toEqual([{ type: "message", content: "queued before open", id: expect.stringMatching(/^[\w-]{22}$/) }]);
    // A turn ran: the Stop goes before the message queued before it, and
    // stops that turn, not the one the message starts (on an idle chat it
    // goes after: limits.spec.ts).
    expect(out.second).toEqual([
        { type: "tool.result", id: "c1", attempt: 1, result: "yes" },
        { type: "cancel" },
        { type: "message", content: "typed offline", id: expect.stringMatching(/^[\w-]{22}$/) },
    ]);
});

sdkTest("a message the gateway has not confirmed goes again with its id, after a reconnect and after a reload", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage();
        const errors: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage, reconnect: { initialDelay: 10, maxDelay: 10 } });
        client.on("error", (e: any) => errors.push(e));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        client.send("one");
        client.send("two");
        client.send("three");
        const [one, two, three] = ws.sent.slice(1);
        ws.push({ type: "message.taken", id: one.id });
        ws.drop(); // before two and three were confirmed: did they arrive?
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        const again = ws.sent.slice(1);
        ws.push({ type: "message.taken", id: two.id }); // it had: the gateway says so again
        ws.push({ type: "error", code: "limit_exceeded", message: "too long", id: three.id });
        client.send("four"); // written, then the page reloads before it is confirmed
        const four = ws.sent[ws.sent.length - 1];
        client.close();
        const stored = JSON.parse(storage.getItem("gateway.session"));
        const reloaded = connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 3);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        const afterReload = ws.sent;
        reloaded.close();
        return { one, two, three, four, again, errors, stored, afterReload };
    });
    expect(new Set([out.one.id, out.two.id, out.three.id, out.four.id]).size).toBe(4);
    expect(out.again).toEqual([out.two, out.three]);
    expect(out.errors).toEqual([{ code: "limit_exceeded", message: "too long", refused: out.three }]);
    expect(out.stored.unsent).toEqual([out.four]);
    expect(out.afterReload).toEqual([{ type: "session.open", tools: [], session: "s1", after: 0 }, out.four]);
});

for (const code of ["unknown_session", "session_unreadable"]) sdkTest(`a session the gateway does not open (${code}) is forgotten and a new one opens on the same connection`, async ({ page }) => {
    const out = await page.evaluate(async (code) => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage({ "gateway.session": JSON.stringify({ session: "gone", seq: 2, events: [] }) });
        const client = connect({ WebSocket: w.FakeSocket, storage, tools: { t: () => 1 } });
        const resets: any[] = [];
        const errors: any[] = [];
        client.on("reset", (r: any) => resets.push(r.reason));
        client.on("error", (e: any) => errors.push(e));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "error", code, message: "not this one" });
        ws.push({ type: "session.opened", session: "fresh", seq: 0 });
        return { sent: ws.sent, resets, errors, session: client.session, sockets: w.FakeSocket.sockets.length };
    }, code);
    expect(out.errors, "no retrying: the same socket goes on").toEqual([{ code, message: "not this one" }]);
    expect(out.sent).toEqual([
        { type: "session.open", tools: ["t"], session: "gone", after: 0 },
        { type: "session.open", tools: ["t"] },
    ]);
    expect(out.resets, "the reset's reason is the refusal's code").toEqual([code]);
    expect(out.session).toBe("fresh");
    expect(out.sockets).toBe(1);
});

for (const code of ["store_unavailable", "worker_failed", "bad_config", "rate_limited", "limit_exceeded", "internal"]) {
    sdkTest(`a session.open the gateway refused (${code}) opens again after the backoff, the session kept`, async ({ page }) => {
        const out = await page.evaluate(async (code) => {
            const { connect } = await import("/static/gateway.js");
            const w = window as any;
            const storage = new w.MemoryStorage({ "gateway.session": JSON.stringify({ session: "s1", seq: 2, events: [] }) });
            const client = connect({ WebSocket: w.FakeSocket, storage, tools: { t: () => 1 }, reconnect: { initialDelay: 20, maxDelay: 20, factor: 2 } });
            const errors: any[] = [];
            const retrying: any[] = [];
            const states: any[] = [];
            client.on("error", (e: any) => errors.push(e.code));
            client.on("error", (e: any) => retrying.push(e.retrying));
            client.on("state", (s: any) => states.push(s.state));
            await w.until(() => w.FakeSocket.sockets.length === 1);
            const first = w.FakeSocket.last();
            first.accept();
            first.push({ type: "error", code, message: `session.open: refused (${code})` });
            await w.until(() => w.FakeSocket.sockets.length === 2);
            const second = w.FakeSocket.last();
            second.accept();
            second.push({ type: "session.opened", session: "s1", seq: 2 });
            return { first: first.sent, second: second.sent, errors, retrying, states, session: client.session, state: client.state };
        }, code);
        expect(out.retrying, "the error says the SDK tries again").toEqual([true]);
        expect(out.first).toEqual([{ type: "session.open", tools: ["t"], session: "s1", after: 0 }]);
        expect(out.second).toEqual([{ type: "session.open", tools: ["t"], session: "s1", after: 0 }]);
        expect(out.errors).toEqual([code]);
        expect(out.states).toEqual(["connecting", "closed", "connecting", "open"]);
        expect(out.session).toBe("s1");
        expect(out.state).toBe("open");
    });
}

sdkTest("a resume refused as bad_frame (the gateway's store lost events the page has) opens the session again from its start, keeping what waits to be sent", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const events = [{ type: "message", seq: 1, message: { role: "user", content: "hi" } }, { type: "session.idle", seq: 2 }];
        const storage = new w.MemoryStorage({ "gateway.session": JSON.stringify({ session: "s1", seq: 2, events }) });
        const client = connect({ WebSocket: w.FakeSocket, storage, tools: { t: () => 1 }, reconnect: { initialDelay: 20, maxDelay: 20, factor: 2 } });
        const resets: any[] = [];
        client.on("reset", (r: any) => resets.push(r.reason));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const first = w.FakeSocket.last();
        first.accept();
        client.send("still there?");
        first.push({ type: "error", code: "bad_frame", message: "bad frame: session.open: after 2 is beyond the session's last event 1" });
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const second = w.FakeSocket.last();
        second.accept();
        second.push({ type: "session.opened", session: "s1", seq: 1 });
        second.push({ type: "message", seq: 1, message: { role: "user", content: "hi" } });
        await w.until(() => second.sent.some((f: any) => f.type === "message"));
        return { first: first.sent, second: second.sent.map((f: any) => ({ ...f, id: undefined })), resets, seq: client.seq, events: client.events.length };
    });
    expect(out.first).toEqual([{ type: "session.open", tools: ["t"], session: "s1", after: 2 }]);
    expect(out.resets).toEqual(["open"]);
    expect(out.second).toEqual([
        { type: "session.open", tools: ["t"], session: "s1", after: 0 },
        { type: "message", content: "still there?", id: undefined },
    ]);
    expect(out.seq).toBe(1);
    expect(out.events).toBe(1);
});

sdkTest("a resume says the epoch of the session.opened its copy came with, across a reconnect and a reload", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage({});
        const client = connect({ WebSocket: w.FakeSocket, storage, reconnect: { initialDelay: 20, maxDelay: 20, factor: 2 } });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const first = w.FakeSocket.last();
        first.accept();
        first.push({ type: "session.opened", session: "s1", seq: 0, epoch: "run1" });
        first.push({ type: "message", seq: 1, message: { role: "user", content: "hi" } });
        first.push({ type: "session.idle", seq: 2 });
        first.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const second = w.FakeSocket.last();
        second.accept();
        second.push({ type: "session.opened", session: "s1", seq: 2, epoch: "run2" }); // the session was loaded again meanwhile
        client.close();
        const reloaded = connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 3);
        const third = w.FakeSocket.last();
        third.accept();
        reloaded.close();
        return { first: first.sent[0], second: second.sent[0], third: third.sent[0] };
    });
    expect(out.first).toEqual({ type: "session.open", tools: [] });
    expect(out.second).toEqual({ type: "session.open", tools: [], session: "s1", after: 2, epoch: "run1" });
    expect(out.third).toEqual({ type: "session.open", tools: [], session: "s1", after: 2, epoch: "run2" });
});

sdkTest("a new session the worker could not start opens once it can, with the messages sent meanwhile", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), tools: { t: () => 1 }, reconnect: { initialDelay: 20, maxDelay: 20, factor: 2 } });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const first = w.FakeSocket.last();
        first.accept();
        first.push({ type: "error", code: "worker_failed", message: "session.open: the worker failed: connection refused" });
        client.send("hello");
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const second = w.FakeSocket.last();
        second.accept();
        second.push({ type: "session.opened", session: "s9", seq: 0 });
        return { first: first.sent.map((f: any) => f.type), second: second.sent.map((f: any) => ({ type: f.type, content: f.content })), session: client.session };
    });
    expect(out.first).toEqual(["session.open"]);
    expect(out.second).toEqual([{ type: "session.open", content: undefined }, { type: "message", content: "hello" }]);
    expect(out.session).toBe("s9");
});

sdkTest("open(id) forgets the session and opens that one from its start; reset() opens a new one", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage();
        const client = connect({ WebSocket: w.FakeSocket, storage, tools: { t: () => 1 } });
        const resets: any[] = [];
        const messages: any[] = [];
        client.on("reset", (r: any) => resets.push({ ...r, session: client.session }));
        client.on("message", (m: any) => messages.push({ content: m.message.content, replayed: m.replayed }));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push({ type: "message", seq: 1, message: { role: "user", content: "in s1" } });
        const old = ws;

        client.open("s2");
        const during = { session: client.session, seq: client.seq, events: client.events.length, stored: storage.getItem("gateway.session") };
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        const opening = ws.sent[0];
        ws.push({ type: "session.opened", session: "s2", seq: 2 });
        ws.push({ type: "message", seq: 1, message: { role: "user", content: "in s2" } });
        ws.push({ type: "model.delta", seq: 2, text: "hi" });
        const opened = { session: client.session, seq: client.seq, stored: JSON.parse(storage.getItem("gateway.session")) };

        client.reset();
        await w.until(() => w.FakeSocket.sockets.length === 3);
        w.FakeSocket.last().accept();
        return { oldClosed: old.readyState === 3, during, opening, opened, fresh: w.FakeSocket.last().sent[0], resets, messages };
    });
    expect(out.oldClosed, "the first session's socket is closed").toBe(true);
    expect(out.during).toEqual({ session: "s2", seq: 0, events: 0, stored: null });
    expect(out.opening).toEqual({ type: "session.open", tools: ["t"], session: "s2", after: 0 });
    expect(out.opened.session).toBe("s2");
    expect(out.opened.seq).toBe(2);
    expect(out.opened.stored).toMatchObject({ session: "s2" });
    expect(out.messages).toEqual([{ content: "in s1", replayed: false }, { content: "in s2", replayed: true }]);
    expect(out.fresh).toEqual({ type: "session.open", tools: ["t"] });
    expect(out.resets).toEqual([{ reason: "open", session: null }, { reason: "reset", session: null }]);
});

sdkTest("an unknown session stays forgotten when the connection drops before the new one opens", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage({ "gateway.session": JSON.stringify({ session: "gone" }) });
        const resets: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage, reconnect: { initialDelay: 10, maxDelay: 10 } });
        client.on("reset", (r: any) => resets.push(r));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        const first = ws.sent[0];
        ws.push({ type: "error", code: "unknown_session", message: "no such session" });
        ws.drop(); // before the new session's session.opened
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        const second = ws.sent[0];
        ws.push({ type: "session.opened", session: "fresh", seq: 0 });
        return { first, second, resets: resets.length, session: client.session, stored: JSON.parse(storage.getItem("gateway.session")).session };
    });
    expect(out.first).toEqual({ type: "session.open", tools: [], session: "gone", after: 0 });
    expect(out.second).toEqual({ type: "session.open", tools: [] });
    expect(out.resets).toBe(1);
    expect(out.session).toBe("fresh");
    expect(out.stored).toBe("fresh");
});

sdkTest("tool cards follow started, retrying and finished", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null });
        const states: string[] = [];
        client.on("tool", (c: any) => states.push(`${c.status} ${c.attempt}/${c.attempts}`));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        let seq = 0;
        const ev = (f: any) => ws.push({ ...f, seq: ++seq });
        ev({ type: "message", message: { role: "assistant", content: "", toolUses: [{ id: "t1", name: "w", arguments: '{"a":1}' }] } });
        ev({ type: "tool.started", id: "t1", name: "w", arguments: '{"a":1}', input: { status: "valid", value: { a: 1 } }, handler: "worker", attempt: 1, attempts: 2, deadline: "x" });
        ev({ type: "tool.retrying", id: "t1", name: "w", attempt: 1, attempts: 2, error: "timed out", code: "timeout", backoff: "200ms" });
        ev({ type: "tool.started", id: "t1", name: "w", arguments: '{"a":1}', input: { status: "valid", value: { a: 1 } }, handler: "worker", attempt: 2, attempts: 2, deadline: "y" });
        ev({ type: "tool.finished", id: "t1", ok: false, name: "w", error: "timed out twice" });
        ev({ type: "message", message: { role: "tool", toolUseId: "t1", name: "w", content: "timed out twice", isError: true } });
        return { states, card: client.cards[0] };
    });
    expect(out.states).toEqual(["pending 0/0", "running 1/2", "retrying 2/2", "running 2/2", "error 2/2", "error 2/2"]);
    expect(out.card).toMatchObject({
        id: "t1", name: "w", handler: "worker", status: "error", error: "timed out twice", local: false,
        failures: [{ attempt: 1, error: "timed out", code: "timeout", backoff: "200ms" }],
        transcript: { content: "timed out twice", isError: true },
    });
});

sdkTest("the page id comes from session.opened, a new one on every connection", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 } });
        const opened: any[] = [];
        const pages: any[] = [client.page];
        client.on("opened", (d: any) => opened.push(d));
        client.on("state", ({ state }: any) => pages.push(`${state}:${client.page}`));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p2" });
        return { opened, pages, page: client.page };
    });
    expect(out.opened).toEqual([
        { session: "s1", seq: 0, resumed: false, page: "p1" },
        { session: "s1", seq: 0, resumed: true, page: "p2" },
    ]);
    // null until the first session.opened; the last id while reconnecting.
    expect(out.pages).toEqual([null, "connecting:null", "open:p1", "closed:p1", "connecting:p1", "open:p2"]);
    expect(out.page).toBe("p2");
});

sdkTest("tool.started's page says where a client attempt runs: here, elsewhere, waiting", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null });
        const seen: string[] = [];
        client.on("tool", (c: any) => seen.push(`${c.id} ${c.status} ${c.page} ${c.where}`));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
        let seq = 0;
        const ev = (f: any) => ws.push({ ...f, seq: ++seq });
        const started = { type: "tool.started", name: "t", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "x" };
        ev({ ...started, id: "here", handler: "client", page: "me" });
        ev({ ...started, id: "there", handler: "client", page: "other" });
        ev({ ...started, id: "nobody", handler: "client" });
        ev({ ...started, id: "worker", handler: "worker" });
        ev({ type: "tool.finished", id: "there", ok: true, name: "t", result: "1" });
        return { seen, cards: client.cards.map((c: any) => [c.id, c.page, c.where]) };
    });
    expect(out.seen).toEqual([
        "here running me here",
        "there running other elsewhere",
        "nobody running null waiting",
        "worker running null null",
        "there done other null", // settled: where no longer applies
    ]);
    expect(out.cards).toEqual([["here", "me", "here"], ["there", "other", null], ["nobody", null, "waiting"], ["worker", null, null]]);
});

sdkTest("a card's value is the result parsed: JSON text becomes a value, other text stays text", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
        let seq = 0;
        const ev = (f: any) => ws.push({ ...f, seq: ++seq });
        ev({ type: "tool.finished", id: "obj", ok: true, name: "t", result: '{"time":"12:00"}' });
        ev({ type: "tool.finished", id: "text", ok: true, name: "t", result: "It's clear in Tokyo." });
        ev({ type: "tool.finished", id: "failed", ok: false, name: "t", error: "boom" });
        return client.cards.map((c: any) => [c.id, c.result, c.value]);
    });
    expect(out).toEqual([
        ["obj", '{"time":"12:00"}', { time: "12:00" }],
        ["text", "It's clear in Tokyo.", "It's clear in Tokyo."],
        ["failed", undefined, undefined],
    ]);
});

sdkTest("tool.leased moves the current attempt between pages; another attempt's lease is ignored", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        let runs = 0;
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            tools: { ask: { run: (_: any, { signal }: any) => { runs++; return new Promise((_r, reject) => signal.addEventListener("abort", () => reject(signal.reason))); } } },
        });
        const seen: string[] = [];
        client.on("tool", (c: any) => seen.push(`${c.attempt} ${c.page} ${c.where} ${c.localState}`));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
        let seq = 0;
        const ev = (f: any) => ws.push({ ...f, seq: ++seq });
        const call = { id: "c1", name: "ask", attempt: 2, attempts: 2 };
        ev({ type: "tool.started", ...call, arguments: "{}", input: { status: "valid", value: {} }, handler: "client", deadline: "2030-01-01T00:00:00Z", page: "other" });
        ev({ type: "tool.leased", ...call }); // the other tab closed: it waits for a page
        ev({ type: "tool.leased", ...call, attempt: 1, page: "stale" }); // not the current attempt: ignored
        ev({ type: "tool.leased", ...call, page: "me" }); // this tab took it
        ws.push({ type: "tool.call", ...call, arguments: "{}", input: { status: "valid", value: {} }, deadline: "2030-01-01T00:00:00Z" });
        await w.sleep(0);
        ev({ type: "tool.leased", ...call, page: "third" }); // and lost it again
        return { seen, runs, card: client.cards[0], sent: ws.sent.slice(1) };
    });
    expect(out.seen).toEqual([
        "2 other elsewhere null",
        "2 null waiting null",
        "2 me here null",
        "2 me here running", // the delivery
        "2 third elsewhere running", // this tab's run goes on until the call settles or is cancelled
    ]);
    expect(out.runs).toBe(1);
    expect(out.card).toMatchObject({ page: "third", where: "elsewhere", local: true, status: "running" });
    expect(out.sent).toEqual([]);
});

sdkTest("a new page id re-evaluates where the cards run", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 } });
        const seen: string[] = [];
        client.on("tool", (c: any) => seen.push(`${c.page} ${c.where}`));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "tool.started", seq: 1, id: "c1", name: "t", arguments: "{}", handler: "client", attempt: 1, attempts: 1, deadline: "x", page: "p1" });
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "p2" });
        ws.push({ type: "tool.leased", seq: 2, id: "c1", name: "t", attempt: 1, page: "p2" });
        return seen;
    });
    // p1 is gone with the old connection: until the lease says otherwise, it runs elsewhere.
    expect(out).toEqual(["p1 here", "p1 elsewhere", "p2 here"]);
});

sdkTest("close code 4000 (unresponsive) reconnects and resumes", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect, CLOSE } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 } });
        const states: any[] = [];
        const resets: any[] = [];
        client.on("state", (s: any) => states.push(s));
        client.on("reset", (r: any) => resets.push(r));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "model.delta", seq: 1, text: "a" });
        ws.drop(CLOSE.UNRESPONSIVE, "no pong");
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        return { code: CLOSE.UNRESPONSIVE, resume: ws.sent[0], closed: states.find((s) => s.state === "closed"), resets: resets.length };
    });
    expect(out.code).toBe(4000);
    expect(out.resume).toEqual({ type: "session.open", tools: [], session: "s1", after: 1 });
    expect(out.closed).toMatchObject({ state: "closed", code: 4000 });
    expect(out.closed.retryIn).toBeGreaterThanOrEqual(5);
    expect(out.resets).toBe(0);
});

sdkTest("a close with 4001 is a close like any other: the session is kept and resumed", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage({ "gateway.session": JSON.stringify({ session: "kept" }) });
        const resets: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage, reconnect: { initialDelay: 10, maxDelay: 10 } });
        client.on("reset", (r: any) => resets.push(r));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.drop(4001, "refused"); // before session.opened: this used to forget the session
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        return { second: ws.sent[0], resets: resets.length, session: client.session };
    });
    expect(out.second).toEqual({ type: "session.open", tools: [], session: "kept", after: 0 });
    expect(out.resets).toBe(0);
    expect(out.session).toBe("kept");
});

sdkTest("refused frames, rate_limited and limit_exceeded included, are error events; the connection stays", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const gw = await import("/static/gateway.js");
        const codes = await import("/static/codes.js");
        const w = window as any;
        const client = gw.connect({ WebSocket: w.FakeSocket, storage: null });
        const errors: any[] = [];
        client.on("error", (e: any) => errors.push(e));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "error", code: gw.FRAME_ERROR.RATE_LIMITED, message: "slow down" });
        ws.push({ type: "error", code: gw.FRAME_ERROR.LIMIT_EXCEEDED, message: "too many tools" });
        client.send("still here");
        return {
            errors, state: client.state, sockets: w.FakeSocket.sockets.length, sent: ws.sent.slice(1),
            same: gw.CLOSE === codes.CLOSE && gw.FRAME_ERROR === codes.FRAME_ERROR && gw.SESSION_ERROR === codes.SESSION_ERROR && gw.TOOL_ERROR === codes.TOOL_ERROR,
            frozen: Object.isFrozen(codes.TOOL_ERROR),
        };
    });
    expect(out.errors).toEqual([{ code: "rate_limited", message: "slow down" }, { code: "limit_exceeded", message: "too many tools" }]);
    expect(out.state).toBe("open");
    expect(out.sockets).toBe(1);
    expect(out.sent).toEqual([{ type: "message", content: "still here", id: expect.any(String) }]);
    expect(out.same).toBe(true);
    expect(out.frozen).toBe(true);
});

sdkTest("a run whose attempt failed elsewhere (tool.retrying, no tool.cancel) is aborted", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const reasons: string[] = [];
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            tools: { slow: (_: any, { signal }: any) => new Promise((_r, reject) => signal.addEventListener("abort", () => { reasons.push(signal.reason.name); reject(signal.reason); })) },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
        const call = { id: "c1", name: "slow", attempts: 2 };
        ws.push({ type: "tool.started", seq: 1, ...call, attempt: 1, arguments: "{}", input: { status: "valid", value: {} }, handler: "client", deadline: "2030-01-01T00:00:00Z", page: "me" });
        ws.push({ type: "tool.call", ...call, attempt: 1, arguments: "{}", input: { status: "valid", value: {} }, deadline: "2030-01-01T00:00:00Z" });
        await w.sleep(0);
        // This tab lost the lease (its connection was judged dead), and the attempt timed out in another tab.
        ws.push({ type: "tool.leased", seq: 2, ...call, attempt: 1, page: "other" });
        ws.push({ type: "tool.retrying", seq: 3, ...call, attempt: 1, error: "timed out", code: "timeout", backoff: "200ms" });
        await w.sleep(10);
        return { reasons, sent: ws.sent.slice(1), card: client.cards[0] };
    });
    expect(out.reasons).toEqual(["TimeoutError"]);
    expect(out.sent).toEqual([]);
    expect(out.card).toMatchObject({ status: "retrying", attempt: 2, page: null, where: null, localState: "cancelled" });
});

sdkTest("an answer written to a dead socket goes again after the reconnect, until its call settles", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({
            WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 },
            tools: { confirm: () => ({ approved: true }) },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "tool.started", seq: 1, id: "c1", name: "confirm", arguments: "{}", input: { status: "valid", value: {} }, handler: "client", attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z", page: "p1" });
        ws.push({ type: "tool.call", id: "c1", name: "confirm", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => ws.sent.length === 2); // the answer, into a socket that is already dead
        ws.drop();
        // The call moved to another tab meanwhile; this page is not sent it again.
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "p2" });
        const beforeReplay = ws.sent.length;
        ws.push({ type: "tool.leased", seq: 2, id: "c1", name: "confirm", attempt: 1, page: "p9" });
        await w.until(() => ws.sent.length === 2);
        const second = { beforeReplay, sent: ws.sent.slice(1) };
        // Once the replay says the call settled, the answer is not sent again.
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 3);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 3, page: "p3" });
        ws.push({ type: "tool.finished", seq: 3, id: "c1", ok: true, name: "confirm", result: '{"approved":true}' });
        await w.sleep(30);
        return { second, third: ws.sent.slice(1) };
    });
    const answer = { type: "tool.result", id: "c1", attempt: 1, result: { approved: true } };
    expect(out.second.beforeReplay).toBe(1); // only session.open: answers wait for the replay
    expect(out.second.sent).toEqual([answer]);
    expect(out.third).toEqual([]);
});

/**
 * A client on the fake socket, its session open, delete_file asking for
 * approval: window.__approval is {client, card()}, card() the call's
 * latest card that takes an answer.
 */
async function approvalWaiting(page: Page) {
    await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 } });
        let latest: any = null;
        client.on("tool", (c: any) => { if (c.approve) latest = c; });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "tool.approval", seq: 1, id: "c1", name: "delete_file", arguments: "{}", input: { status: "valid", value: {} }, handler: "worker", digest: "d1", deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => latest);
        w.__approval = { client, card: () => latest };
    });
}

sdkTest("an approval given while the socket is down is kept, and a later one replaces it: the last goes once", async ({ page }) => {
    await approvalWaiting(page);
    const out = await page.evaluate(async () => {
        const w = window as any;
        const { card } = w.__approval;
        let ws = w.FakeSocket.last();
        ws.drop();
        const first = card().approve(true); // offline: kept
        const second = card().approve(false); // the user changed their mind
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 1, page: "p2" });
        await w.until(() => ws.sent.length === 2);
        await w.sleep(20);
        return { first, second, sent: ws.sent.slice(1) };
    });
    expect(out.first).toBe(false);
    expect(out.second).toBe(false);
    expect(out.sent).toEqual([{ type: "tool.approve", id: "c1", digest: "d1", approved: false }]);
});

sdkTest("an approval a node missed goes again after the move or reconnect, until the gateway takes it", async ({ page }) => {
    await approvalWaiting(page);
    const out = await page.evaluate(async () => {
        const w = window as any;
        const { client, card } = w.__approval;
        let ws = w.FakeSocket.last();
        const sentNow = card().approve(true);
        // A double-click: the first answer stands, and goes once.
        const sentAgain = card().approve(false);
        await w.sleep(20);
        const once = ws.sent.slice(1);
        // The node that ran the session died before it read the answer:
        // the page's node moves it, in place (a second session.opened).
        ws.push({ type: "session.opened", session: "s1", seq: 1, page: "p2" });
        await w.until(() => ws.sent.length === 3);
        const moved = ws.sent.slice(1);
        // Taken this time; a reconnect after that sends nothing again (the
        // message after it comes first).
        ws.push({ type: "tool.approved", seq: 2, id: "c1", approved: true });
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "p3" });
        client.send("probe");
        await w.until(() => ws.sent.length >= 2);
        return { sentNow, sentAgain, once, moved, after: ws.sent.slice(1).map((f: any) => f.type) };
    });
    const approve = { type: "tool.approve", id: "c1", digest: "d1", approved: true };
    expect(out.sentNow).toBe(true);
    expect(out.sentAgain).toBe(false);
    expect(out.once).toEqual([approve]);
    expect(out.moved).toEqual([approve, approve]);
    expect(out.after).toEqual(["message"]);
});

sdkTest("an approval whose call settled meanwhile (the replay says so) is not sent again", async ({ page }) => {
    await approvalWaiting(page);
    const out = await page.evaluate(async () => {
        const w = window as any;
        const { client, card } = w.__approval;
        let ws = w.FakeSocket.last();
        card().approve(false);
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "p2" });
        ws.push({ type: "tool.finished", seq: 2, id: "c1", name: "delete_file", ok: false, code: "timeout", error: "The user did not approve" });
        client.send("probe");
        await w.until(() => ws.sent.length >= 2);
        return ws.sent.slice(1).map((f: any) => f.type);
    });
    expect(out).toEqual(["message"]); // the probe alone
});

sdkTest("an approval given during a replay goes once: the replay's end does not send it again", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, reconnect: { initialDelay: 10, maxDelay: 10 } });
        let card: any = null;
        client.on("tool", (c: any) => { if (c.approve) card = c; });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.drop();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 2, page: "p2" });
        ws.push({ type: "tool.approval", seq: 1, id: "c1", name: "delete_file", arguments: "{}", input: { status: "valid", value: {} }, handler: "worker", digest: "d1", deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => card);
        card.approve(true); // before the replay's end
        ws.push({ type: "session.idle", seq: 2 });
        client.send("probe");
        await w.until(() => ws.sent.length >= 3);
        return ws.sent.slice(1).map((f: any) => f.type);
    });
    expect(out).toEqual(["tool.approve", "message"]);
});

sdkTest("an answer goes again after the session moved to another node, on the same socket", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        connect({ WebSocket: w.FakeSocket, storage: null, tools: { confirm: () => ({ approved: true }) } });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "tool.started", seq: 1, id: "c1", name: "confirm", arguments: "{}", input: { status: "valid", value: {} }, handler: "client", attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z", page: "p1" });
        ws.push({ type: "tool.call", id: "c1", name: "confirm", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => ws.sent.length === 2); // the answer, to a node that died
        ws.push({ type: "session.opened", session: "s1", seq: 1, page: "p2" }); // moved, in place
        await w.until(() => ws.sent.length === 3);
        return ws.sent.slice(1).map((f: any) => f.type);
    });
    expect(out).toEqual(["tool.result", "tool.result"]);
});

sdkTest("a second session.opened on an open socket (the session moved to another node) is a resume", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null, tools: { confirm: () => ({ approved: true }) } });
        const resets: any[] = [];
        const opened: any[] = [];
        client.on("reset", (d: any) => resets.push(d));
        client.on("opened", (d: any) => opened.push(d));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        ws.push({ type: "message", seq: 1, message: { role: "user", content: "hi" } });
        ws.push({ type: "session.idle", seq: 2 });
        // The node that ran the session died; this page's node moved it.
        ws.push({ type: "session.opened", session: "s1", seq: 3, page: "p2" });
        ws.push({ type: "session.idle", seq: 2 }); // a replay overlapping what the page saw
        ws.push({ type: "message", seq: 3, message: { role: "assistant", content: "hello" } });
        await w.sleep(20);
        return { page: client.page, seq: client.seq, resets, opened, events: client.events.map((e: any) => e.seq) };
    });
    expect(out.resets).toEqual([]);
    expect(out.page).toBe("p2");
    expect(out.seq).toBe(3);
    expect(out.events).toEqual([1, 2, 3]);
    expect(out.opened.map((o: any) => [o.page, o.resumed])).toEqual([["p1", false], ["p2", true]]);
});

sdkTest("a card's progress goes when its call settles", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: null });
        const progress: any[] = [];
        client.on("tool", (c: any) => progress.push(c.progress));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        let seq = 0;
        const ev = (f: any) => ws.push({ ...f, seq: ++seq });
        ev({ type: "tool.started", id: "t1", name: "w", arguments: "{}", input: { status: "valid", value: {} }, handler: "worker", attempt: 1, attempts: 1, deadline: "x" });
        ev({ type: "tool.progress", id: "t1", name: "w", attempt: 1, progress: 1, total: 2, message: "half", deadline: "y" });
        ev({ type: "tool.finished", id: "t1", ok: true, name: "w", result: "done" });
        return { progress, card: client.cards[0] };
    });
    expect(out.progress).toEqual([null, { progress: 1, total: 2, message: "half" }, null]);
    expect(out.card).toMatchObject({ status: "done", progress: null });
});

sdkTest("progress() cuts a message to the gateway's 500 bytes of UTF-8, between characters", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        let release: () => void = () => {};
        const client = connect({
            WebSocket: w.FakeSocket,
            storage: null,
            tools: {
                upload: (_: any, ctx: any) => {
                    ctx.progress({ progress: 1, message: "é".repeat(300) }); // 600 bytes
                    ctx.progress({ message: "x".repeat(499) + "é" }); // 501 bytes
                    return new Promise<void>((r) => { release = r; });
                },
            },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0 });
        ws.push({ type: "tool.call", id: "c1", name: "upload", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => ws.sent.length === 3);
        release();
        const bytes = (s: string) => new TextEncoder().encode(s).length;
        return ws.sent.slice(1).map((f: any) => ({ type: f.type, message: f.message, bytes: bytes(f.message) }));
    });
    expect(out).toEqual([
        { type: "tool.progress", message: "é".repeat(250), bytes: 500 },
        { type: "tool.progress", message: "x".repeat(499), bytes: 499 },
    ]);
});

sdkTest("a socket that answers nothing after a message is taken for dead: the SDK reconnects and sends the message again, with its id", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const states: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), answerTimeout: 300, reconnect: { initialDelay: 10, maxDelay: 10 } });
        client.on("state", (d: any) => states.push(d));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const first = w.FakeSocket.last();
        first.accept();
        first.push({ type: "session.opened", session: "s1", seq: 1 });
        first.push({ type: "session.idle", seq: 1 });
        await w.sleep(400); // an idle page is not watched: nothing was asked
        const idle = w.FakeSocket.sockets.length;
        client.send("hello");
        // From now on the socket is silent: no message.taken, and no close.
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const second = w.FakeSocket.last();
        second.accept();
        const open = second.sent[0];
        second.push({ type: "session.opened", session: "s1", seq: 1 });
        await w.until(() => second.sent.length === 2);
        second.push({ type: "message.taken", id: second.sent[1].id });
        await w.sleep(400); // answered: no third socket
        return { idle, sentFirst: first.sent, open, again: second.sent[1], states, firstState: first.readyState, sockets: w.FakeSocket.sockets.length };
    });
    expect(out.idle).toBe(1);
    expect(out.sentFirst[1]).toMatchObject({ type: "message", content: "hello" });
    expect(out.again).toEqual(out.sentFirst[1]);
    expect(out.open).toMatchObject({ type: "session.open", session: "s1", after: 1 });
    expect(out.states.find((s: any) => s.state === "closed")).toMatchObject({ code: 1006, reason: "no answer from the gateway in 300 ms" });
    expect(out.firstState).toBe(3);
    expect(out.sockets).toBe(2);
});

sdkTest("a socket that answers nothing after a tool's answer, an approval or a Stop is taken for dead; an idle Stop and a progress report are not watched", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const call = (id: string) => ({ id, name: "confirm", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" });
        let release: () => void = () => {};
        const client = connect({
            WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), answerTimeout: 300, reconnect: { initialDelay: 10, maxDelay: 10 },
            tools: {
                confirm: async (_: any, ctx: any) => {
                    ctx.progress({ progress: 1 });
                    await new Promise<void>((resolve) => { release = resolve; });
                    return { approved: true };
                },
            },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        let ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 1, page: "p1" });
        ws.push({ type: "session.idle", seq: 1 });
        client.cancel(); // nothing runs: the gateway may say nothing
        await w.sleep(400);
        const idleStop = { sockets: w.FakeSocket.sockets.length, sent: ws.sent.map((f: any) => f.type) };
        // A call: the page runs it, reports progress and answers; then the socket is silent.
        ws.push({ type: "message", seq: 2, message: { role: "user", content: "confirm" } });
        ws.push({ type: "tool.started", seq: 3, handler: "client", page: "p1", ...call("c1") });
        ws.push({ type: "tool.call", ...call("c1") });
        await w.until(() => ws.sent.length === 3); // the progress report, which the gateway need not answer
        await w.sleep(400);
        const afterProgress = w.FakeSocket.sockets.length;
        release();
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const dead = ws.sent.slice(2).map((f: any) => f.type);
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 3, page: "p2" });
        await w.until(() => ws.sent.length === 2);
        const again = ws.sent[1];
        ws.push({ type: "tool.finished", seq: 4, id: "c1", ok: true, name: "confirm", result: '{"approved":true}' });
        // Stop while the turn runs, into a socket now silent.
        client.cancel();
        await w.until(() => w.FakeSocket.sockets.length === 3);
        const stopped = ws.sent.at(-1);
        // An approval, into a socket silent after it.
        let card: any = null;
        client.on("tool", (c: any) => { if (c.approve) card = c; });
        ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 4, page: "p3" });
        ws.push({ type: "tool.approval", seq: 5, id: "c2", name: "delete_file", arguments: "{}", input: { status: "valid", value: {} }, handler: "worker", digest: "d2", deadline: "2030-01-01T00:00:00.000Z" });
        await w.until(() => card);
        card.approve(true);
        await w.until(() => w.FakeSocket.sockets.length === 4);
        return { idleStop, afterProgress, dead, again, stopped, approved: ws.sent.at(-1) };
    });
    expect(out.idleStop).toEqual({ sockets: 1, sent: ["session.open", "cancel"] });
    expect(out.afterProgress, "a progress report is not watched").toBe(1);
    expect(out.dead).toEqual(["tool.progress", "tool.result"]);
    expect(out.again).toEqual({ type: "tool.result", id: "c1", attempt: 1, result: { approved: true } });
    expect(out.stopped).toEqual({ type: "cancel" });
    expect(out.approved).toEqual({ type: "tool.approve", id: "c2", digest: "d2", approved: true });
});

sdkTest("a tool's value that is not JSON is answered at once with a tool_failed error that says so, never a tool.result the gateway refuses", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect, ToolError } = await import("/static/gateway.js");
        const w = window as any;
        const cycle: any = {};
        cycle.self = cycle;
        const values: Record<string, () => any> = {
            bigint: () => 1n,
            cycle: () => cycle,
            function: () => () => 1, // return res.json, without the call
            symbol: () => Symbol("s"),
            tojson: () => ({ toJSON() { return undefined; } }),
            date: () => new Date(0), // a toJSON that says something: a result
            detail: () => { throw new ToolError("no such order", { detail: 2n }); },
        };
        connect({ WebSocket: w.FakeSocket, storage: null, tools: values });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        for (const name of Object.keys(values)) {
            ws.push({ type: "tool.call", id: name, name, arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" });
        }
        await w.until(() => ws.sent.length === 1 + Object.keys(values).length);
        return Object.fromEntries(ws.sent.slice(1).map((f: any) => [f.id, f]));
    });
    for (const [name, text] of [["bigint", "BigInt"], ["cycle", "circular"], ["function", "JSON has no function"], ["symbol", "JSON has no symbol"], ["tojson", "toJSON()"]]) {
        expect(out[name], name).toMatchObject({ type: "tool.error", code: "tool_failed" });
        expect(out[name].error, name).toContain("The tool's result is not JSON");
        expect(out[name].error, name).toContain(text);
    }
    expect(out.date).toEqual({ type: "tool.result", id: "date", attempt: 1, result: "1970-01-01T00:00:00.000Z" });
    expect(out.detail).toMatchObject({ type: "tool.error", code: "tool_failed" });
    expect(out.detail.error).toContain("The tool's error is not JSON");
});

sdkTest("a progress report leaves out what the gateway would refuse, and ctx.deadline follows the deadline the gateway moved", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const seen: any = {};
        let go: () => void = () => {};
        connect({
            WebSocket: w.FakeSocket, storage: null, tools: {
                upload: async (_: any, ctx: any) => {
                    seen.before = ctx.deadline.toISOString();
                    ctx.progress({ progress: -1, total: -5, message: "starting" });
                    await new Promise<void>((resolve) => { go = resolve; });
                    seen.after = ctx.deadline.toISOString();
                    return "done";
                },
            },
        });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 0, page: "p1" });
        const call = { id: "c1", name: "upload", arguments: "{}", input: { status: "valid", value: {} }, attempt: 1, attempts: 1, deadline: "2030-01-01T00:00:00.000Z" };
        ws.push({ type: "tool.started", seq: 1, handler: "client", page: "p1", ...call });
        ws.push({ type: "tool.call", ...call });
        await w.until(() => ws.sent.length === 2);
        ws.push({ type: "tool.progress", seq: 2, id: "c1", attempt: 1, message: "starting", deadline: "2030-01-01T00:00:30.000Z" });
        await w.sleep(10);
        go();
        await w.until(() => ws.sent.length === 3);
        return { seen, report: ws.sent[1] };
    });
    expect(out.report).toEqual({ type: "tool.progress", id: "c1", attempt: 1, message: "starting" });
    expect(out.seen).toEqual({ before: "2030-01-01T00:00:00.000Z", after: "2030-01-01T00:00:30.000Z" });
});

sdkTest("connect() throws for a tool name the gateway would refuse at every open, where the page retried for ever", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const tryName = (name: string) => {
            try {
                connect({ WebSocket: w.FakeSocket, storage: null, tools: { [name]: () => 1 } }).close();
                return "connected";
            } catch (err: any) {
                return `${err.name}: ${err.message}`;
            }
        };
        return { empty: tryName(""), long: tryName("x".repeat(65)), longest: tryName("é".repeat(32)) };
    });
    expect(out.empty).toBe('TypeError: tool name "": a tool\'s name is 1 to 64 bytes');
    expect(out.long).toContain("TypeError: tool name");
    expect(out.longest).toBe("connected");
});

sdkTest("a session.open waits past answerTimeout for its answer, which may wait for the worker's decision", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const states: any[] = [];
        const client = connect({ WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), answerTimeout: 300, reconnect: { initialDelay: 10, maxDelay: 10 } });
        client.on("state", (d: any) => states.push(d.state));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        await w.sleep(900); // a worker's session.start that takes its time: three answerTimeouts
        const quiet = { sockets: w.FakeSocket.sockets.length, readyState: ws.readyState };
        ws.push({ type: "session.opened", session: "s1", seq: 1 });
        ws.push({ type: "session.idle", seq: 1 });
        await w.until(() => client.session === "s1");
        return { quiet, first: ws.sent[0], states, sockets: w.FakeSocket.sockets.length };
    });
    expect(out.first).toMatchObject({ type: "session.open" });
    expect(out.quiet, "the socket was kept while the gateway decided").toEqual({ sockets: 1, readyState: 1 });
    expect(out.states).toEqual(["connecting", "open"]);
    expect(out.sockets).toBe(1);
});

sdkTest("a message sent while the socket is down survives a reload, and goes once the page is back", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const storage = new w.MemoryStorage();
        const first = connect({ WebSocket: w.FakeSocket, storage, reconnect: { initialDelay: 60_000, maxDelay: 60_000 } });
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 1 });
        ws.push({ type: "session.idle", seq: 1 });
        ws.drop(); // offline: the next try is a minute away
        first.send("typed while offline");
        first.close(); // the reload
        const stored = JSON.parse(storage.getItem("gateway.session"));
        connect({ WebSocket: w.FakeSocket, storage });
        await w.until(() => w.FakeSocket.sockets.length === 2);
        const back = w.FakeSocket.last();
        back.accept();
        back.push({ type: "session.opened", session: "s1", seq: 1 });
        await w.until(() => back.sent.length === 2);
        return { stored: stored.unsent, sent: back.sent };
    });
    expect(out.stored).toEqual([expect.objectContaining({ type: "message", content: "typed while offline" })]);
    expect(out.sent[0]).toMatchObject({ type: "session.open", session: "s1" });
    expect(out.sent[1]).toEqual(out.stored[0]);
});

test("after a sleep, a return online or the tab shown again, a silent socket is pinged: one that answers stays, a dead one is replaced", async ({ page }) => {
    // A page and a clock of its own: the SDK specs' shared page has none.
    await installFakeSocket(page);
    await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
    await page.goto("/healthz");
    await page.clock.install(); // time flows; fastForward is a laptop's sleep
    const start = () => page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), answerTimeout: 5_000, reconnect: { initialDelay: 10, maxDelay: 10 } });
        w.states = [];
        client.on("state", (d: any) => w.states.push(d));
        await w.until(() => w.FakeSocket.sockets.length === 1);
        const ws = w.FakeSocket.last();
        ws.accept();
        ws.push({ type: "session.opened", session: "s1", seq: 1, page: "p1" });
        ws.push({ type: "session.idle", seq: 1 });
    });
    const pings = () => page.evaluate(() => (window as any).FakeSocket.sockets.map((s: any) => s.sent.filter((f: any) => f.type === "ping").length));
    await start();

    // Heard from a moment ago: a return online sends nothing.
    await page.evaluate(() => dispatchEvent(new Event("online")));
    expect(await pings()).toEqual([0]);

    // Asleep a minute: on waking the socket is pinged, once though the
    // browser says it is online and the tab shown too; its pong keeps it.
    await page.clock.fastForward(60_000);
    await expect.poll(pings).toEqual([1]);
    await page.evaluate(() => { dispatchEvent(new Event("online")); document.dispatchEvent(new Event("visibilitychange")); });
    expect(await pings(), "one ping at a time").toEqual([1]);
    await page.evaluate(() => (window as any).FakeSocket.last().push({ type: "pong" }));
    await page.clock.runFor(1_000);
    expect(await page.evaluate(() => (window as any).FakeSocket.sockets.length), "a socket that answered stays").toBe(1);

    // Silent 15 s, then back online: pinged again; and again as the tab shows.
    await page.clock.runFor(15_000);
    await page.evaluate(() => dispatchEvent(new Event("online")));
    await expect.poll(pings).toEqual([2]);
    await page.evaluate(() => (window as any).FakeSocket.last().push({ type: "pong" }));
    await page.clock.runFor(15_000);
    await page.evaluate(() => document.dispatchEvent(new Event("visibilitychange")));
    await expect.poll(pings).toEqual([3]);

    // No pong: after answerTimeout the socket is taken for dead, and another opens.
    await page.clock.runFor(5_100);
    await expect.poll(() => page.evaluate(() => (window as any).FakeSocket.sockets.length)).toBe(2);
    const closed = await page.evaluate(() => (window as any).states.find((s: any) => s.state === "closed"));
    expect(closed).toMatchObject({ code: 1006, reason: "no answer from the gateway in 5000 ms" });
    expect(await page.evaluate(() => (window as any).FakeSocket.sockets[0].readyState)).toBe(3);
});

sdkTest("a Stop written into a socket that died goes again on the next, until the turn's end is seen", async ({ page }) => {
    const out = await page.evaluate(async () => {
        const { connect } = await import("/static/gateway.js");
        const w = window as any;
        const client = connect({ WebSocket: w.FakeSocket, storage: new w.MemoryStorage(), answerTimeout: 300, reconnect: { initialDelay: 10, maxDelay: 10 } });
        const open = async (n: number, seq: number) => {
            await w.until(() => w.FakeSocket.sockets.length === n);
            const ws = w.FakeSocket.last();
            ws.accept();
            ws.push({ type: "session.opened", session: "s1", seq, page: `p${n}` });
            return ws;
        };
        const first = await open(1, 0);
        client.send("stream a long answer");
        await w.until(() => first.sent.length === 2);
        first.push({ type: "message.taken", id: first.sent[1].id });
        first.push({ type: "message", seq: 1, message: { role: "user", content: "stream a long answer", id: first.sent[1].id } });
        first.push({ type: "model.delta", seq: 2, text: "Here is" });
        client.cancel(); // the socket is dead from now on: no answer comes
        const second = await open(2, 2);
        await w.until(() => second.sent.length === 2);
        const again = second.sent.map((f: any) => f.type);
        second.push({ type: "model.finished", seq: 3, stopReason: "cancelled", usage: {} });
        second.push({ type: "session.idle", seq: 4 });
        second.drop(1006);
        const third = await open(3, 4);
        await w.sleep(200);
        return { first: first.sent.map((f: any) => f.type), again, third: third.sent.map((f: any) => f.type) };
    });
    expect(out.first).toEqual(["session.open", "message", "cancel"]);
    expect(out.again, "the Stop goes again").toEqual(["session.open", "cancel"]);
    expect(out.third, "once the turn's end is seen, no more").toEqual(["session.open"]);
});
