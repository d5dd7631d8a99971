// Replays: a signed request captured on the wire and sent again within the
// signature window must not run a tool twice. The handler runs on a fake
// clock (its `now` option), so the window can pass in an instant.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { serve, serverURL, sign, ReplayMemory, DEFAULT_WINDOW_SECONDS, REPLAY_MARGIN_MS } from "../index.mjs";
import { closeServer } from "../testing/close.mjs";

const secret = "replay-test-secret";
const T0 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
let clock = T0;
let server;
let url;
let runs; // decide's calls, by trigger
let gate; // while set, tool.execute waits for it
let signals; // decide's signals, in call order
let honour; // decide throws once its signal aborted, as workers.md asks

async function decide({ trigger, proposed, signal }) {
    const key = trigger.type === "tool.execute" ? `${trigger.id}#${trigger.attempt}` : trigger.type;
    runs[key] = (runs[key] ?? 0) + 1;
    signals.push(signal);
    if (trigger.type !== "tool.execute") return proposed;
    if (gate) await gate.promise;
    if (honour && signal.aborted) throw new Error(`stopped: ${signal.reason.message}`);
    return { actions: [{ type: "tool.result", result: { run: runs[key], attempt: trigger.attempt } }] };
}

before(async () => {
    server = await serve({ decide, secret, port: 0, now: () => clock, onError: () => {} });
    url = serverURL(server);
});
after(() => closeServer(server));
beforeEach(() => {
    runs = {};
    signals = [];
    gate = null;
    honour = false;
});

/** A request as the gateway signs it, at the fake clock's time unless ts is given. */
function signed(payload, ts = Math.floor(clock / 1000)) {
    const body = JSON.stringify(payload);
    return { body, headers: { "content-type": "application/json", "x-gateway-timestamp": String(ts), "x-gateway-signature": sign(secret, ts, body) } };
}

/** Sends a signed request (again, for a replay); signal aborts it. */
async function post({ body, headers }, signal) {
    const res = await fetch(url, { method: "POST", headers, body, signal });
    return { status: res.status, text: await res.text() };
}

let calls = 0;
/** A tool.execute trigger of a new call (unless id is given). */
const execute = (attempt = 1, id = `call_${++calls}`) => ({
    session: "s1",
    trigger: { type: "tool.execute", id, name: "send_email", arguments: '{"to":"a@example.com"}', input: { status: "valid", value: { to: "a@example.com" } }, attempt },
    proposed: {},
});

const released = () => {
    let release;
    const promise = new Promise((resolve) => { release = resolve; });
    return { promise, release };
};

async function until(fn, ms = 2000) {
    const start = Date.now();
    while (!fn()) {
        if (Date.now() - start > ms) throw new Error(`timed out waiting for ${fn}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
    }
}

test("a replayed tool.execute gets the same answer, and decide runs once", async () => {
    const payload = execute();
    const request = signed(payload);
    const first = await post(request);
    assert.equal(first.status, 200);
    assert.deepEqual(JSON.parse(first.text), { actions: [{ type: "tool.result", result: { run: 1, attempt: 1 } }] });

    clock += 60_000;
    assert.deepEqual(await post(request), first, "the captured request, replayed");
    // The gateway sends the same attempt again after a restart, signed anew:
    // the same answer is right for it too.
    assert.deepEqual(await post(signed(payload)), first, "the same attempt, signed anew");
    assert.deepEqual(runs, { [`${payload.trigger.id}#1`]: 1 });
});

test("duplicates that arrive while decide runs wait for it: decide runs once", async () => {
    gate = released();
    const request = signed(execute());
    const answers = Promise.all([post(request), post(request), post(signed(JSON.parse(request.body)))]);
    await until(() => signals.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the duplicates are in, waiting
    assert.equal(signals.length, 1);
    gate.release();
    const [a, b, c] = await answers;
    assert.equal(a.status, 200);
    assert.deepEqual(b, a);
    assert.deepEqual(c, a);
    assert.deepEqual(Object.values(runs), [1]);
});

test("decide's signal aborts only when every request waiting for the run has gone", async () => {
    gate = released();
    const request = signed(execute());
    const one = new AbortController();
    const two = new AbortController();
    const first = post(request, one.signal).catch((err) => err.name);
    await until(() => signals.length === 1);
    const second = post(request, two.signal).catch((err) => err.name);
    await new Promise((resolve) => setTimeout(resolve, 50));
    one.abort();
    assert.equal(await first, "AbortError");
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(signals[0].aborted, false, "a request still waits for the run");
    two.abort();
    assert.equal(await second, "AbortError");
    await until(() => signals[0].aborted);
    assert.equal(signals[0].reason.message, "the gateway closed the request");
    gate.release();
});

test("another attempt of the same call runs again", async () => {
    const one = execute(1);
    const two = execute(2, one.trigger.id);
    const a = await post(signed(one));
    const b = await post(signed(two));
    assert.deepEqual(JSON.parse(b.text), { actions: [{ type: "tool.result", result: { run: 1, attempt: 2 } }] });
    assert.notDeepEqual(a, b);
    assert.deepEqual(runs, { [`${one.trigger.id}#1`]: 1, [`${one.trigger.id}#2`]: 1 });
});

test("a replayed message trigger is refused with 409, however its signature header is spelt", async () => {
    const payload = { session: "s1", trigger: { type: "message", message: { role: "user", content: "transfer $100" } }, proposed: { actions: [{ type: "model.prompt" }] } };
    const request = signed(payload);
    assert.equal((await post(request)).status, 200);

    const hex = request.headers["x-gateway-signature"].slice(3);
    for (const signature of [request.headers["x-gateway-signature"], `v1=${hex.toUpperCase()}`, `v0=abc, v1=${hex}`]) {
        const res = await post({ ...request, headers: { ...request.headers, "x-gateway-signature": signature } });
        assert.equal(res.status, 409, signature);
        assert.match(JSON.parse(res.text).error, /^replayed request: a request signed at \d+ with this signature was answered already/);
    }
    assert.deepEqual(runs, { message: 1 });

    // The same trigger signed at another time is another request.
    clock += 1000;
    assert.equal((await post(signed(payload))).status, 200);
    assert.deepEqual(runs, { message: 2 });
});

test("what is remembered expires after the window", async () => {
    const payload = execute();
    const request = signed(payload);
    const first = await post(request);
    const ttl = DEFAULT_WINDOW_SECONDS * 1000 + REPLAY_MARGIN_MS;

    clock += ttl - 1000;
    assert.deepEqual(await post(signed(payload)), first, "still remembered");
    const replay = await post(request);
    assert.equal(replay.status, 401, "past the window, verify refuses the captured request");
    assert.match(JSON.parse(replay.text).error, /outside the replay window/);

    clock += 2000;
    const again = await post(signed(payload));
    assert.equal(again.status, 200);
    assert.deepEqual(JSON.parse(again.text).actions[0].result, { run: 2, attempt: 1 }, "forgotten: decide runs again");
});

test("ReplayMemory: entries expire, running ones last until answered", () => {
    let now = 0;
    const m = new ReplayMemory({ ttlMs: 1000, now: () => now });
    assert.equal(m.see("a", 0), true);
    assert.equal(m.see("a", 0), false, "seen");
    m.start("b", "run");
    now = 500;
    m.see("c", 400); // signed earlier than now: lasts from now
    assert.equal(m.size, 3);
    now = 1000;
    assert.equal(m.get("a"), undefined);
    assert.equal(m.get("b").run, "run");
    assert.equal(m.size, 2);
    m.finish("b", { status: 200, text: "{}" }, 2, 0);
    assert.deepEqual(m.get("b").answer, { status: 200, text: "{}" });
    now = 1499;
    assert.equal(m.size, 2);
    now = 2000;
    assert.equal(m.size, 0);
    assert.equal(m.bytes, 0);
    assert.equal(m.see("a", now), true, "expired: new again");
});

test("ReplayMemory: at most maxEntries, the oldest dropped first", () => {
    const m = new ReplayMemory({ ttlMs: 1000, maxEntries: 3, now: () => 0 });
    for (const k of ["a", "b", "c", "d"]) m.see(k, 0);
    assert.equal(m.size, 3);
    assert.equal(m.get("a"), undefined);
    assert.ok(m.get("b") && m.get("d"));
});

test("ReplayMemory: answers over maxBytes are dropped, oldest first; their keys stay", () => {
    const m = new ReplayMemory({ ttlMs: 1000, maxBytes: 10, now: () => 0 });
    m.finish("a", "A", 6, 0);
    m.finish("b", "B", 4, 0);
    assert.equal(m.bytes, 10);
    m.finish("c", "C", 3, 0);
    assert.equal(m.bytes, 7);
    assert.deepEqual(m.get("a"), { expires: 1000 }, "the entry stays, without its answer");
    assert.equal(m.get("b").answer, "B");
    assert.equal(m.get("c").answer, "C");
});

test("a tool.execute whose answer was dropped for room is refused, not run again", async () => {
    const small = await serve({ decide, secret, port: 0, now: () => clock, maxReplayBytes: 1, onError: () => {} });
    try {
        const request = signed(execute());
        const res = (body) => fetch(serverURL(small), { method: "POST", headers: request.headers, body }).then(async (r) => ({ status: r.status, json: await r.json() }));
        assert.equal((await res(request.body)).status, 200);
        const again = await res(request.body);
        assert.equal(again.status, 409);
        assert.match(again.json.error, /^replayed request: attempt 1 of call call_\d+ was answered already, and its answer is no longer kept$/);
        assert.deepEqual(Object.values(runs), [1]);
    } finally {
        await new Promise((resolve) => small.close(resolve));
    }
});

test("a run every request left, that fails, is not the attempt's answer: the attempt sent again runs anew", async () => {
    // A decide that stops when its signal aborts, as workers.md asks: the
    // gateway crashed mid-run, and sends the attempt again once restarted.
    gate = released();
    honour = true;
    const payload = execute();
    const crashed = new AbortController();
    const first = post(signed(payload), crashed.signal).catch((err) => err.name);
    await until(() => signals.length === 1);
    const stop = new Promise((resolve) => signals[0].addEventListener("abort", resolve, { once: true }));
    crashed.abort();
    assert.equal(await first, "AbortError");
    await stop;
    gate.release(); // decide goes on, sees its signal aborted, and throws
    await new Promise((resolve) => setTimeout(resolve, 20));

    gate = null;
    const again = await post(signed(payload));
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(JSON.parse(again.text), { actions: [{ type: "tool.result", result: { run: 2, attempt: 1 } }] });
});

test("a run every request left that succeeds is the attempt's answer: the attempt sent again gets it, decide does not run again", async () => {
    gate = released(); // decide ignores its signal, and finishes its work
    const payload = execute();
    const crashed = new AbortController();
    const first = post(signed(payload), crashed.signal).catch((err) => err.name);
    await until(() => signals.length === 1);
    crashed.abort();
    assert.equal(await first, "AbortError");
    await until(() => signals[0].aborted);
    gate.release();
    await new Promise((resolve) => setTimeout(resolve, 20)); // its answer is remembered

    const again = await post(signed(payload));
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(JSON.parse(again.text), { actions: [{ type: "tool.result", result: { run: 1, attempt: 1 } }] });
    assert.deepEqual(runs, { [`${payload.trigger.id}#1`]: 1 }, "the tool ran once");
});
