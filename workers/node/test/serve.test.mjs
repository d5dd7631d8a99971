import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { delegate, serve, serverURL, sign } from "../index.mjs";
import { closeServer } from "../testing/close.mjs";

const secret = "node-test-secret";
let server;
let url;
let seen; // the last input decide got

async function decide(input) {
    seen = input;
    const { trigger, proposed, signal } = input;
    switch (trigger.type) {
        case "session.start":
            return { agent: { model: "scripted" } };
        case "message":
            return Promise.resolve(proposed);
        case "tool.execute":
            if (trigger.name === "throws") throw new Error("the tool broke");
            if (trigger.name === "nothing") return undefined;
            if (trigger.name === "waits") {
                await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
                return { actions: [{ type: "tool.error", error: `aborted: ${signal.reason.message}` }] };
            }
            return { actions: [{ type: "tool.result", result: trigger.input.value }] };
        default:
            return proposed;
    }
}

before(async () => {
    server = await serve({ decide, secret, port: 0, onError: () => {} });
    url = serverURL(server);
});
after(() => closeServer(server));

// post sends a request signed as the gateway signs it; over lets a case
// change the headers, the body or the method.
async function post(payload, over = {}) {
    const body = over.body ?? JSON.stringify(payload);
    const ts = over.timestamp ?? Math.floor(Date.now() / 1000);
    const headers = {
        "content-type": "application/json",
        "x-gateway-timestamp": String(ts),
        "x-gateway-signature": sign(over.secret ?? secret, ts, body),
        ...over.headers,
    };
    const res = await fetch(url, { method: over.method ?? "POST", headers, body: over.method === "GET" ? undefined : body });
    return { status: res.status, json: await res.json() };
}

const execute = (name, value) => ({
    session: "s1",
    trigger: { type: "tool.execute", id: "call_1", name, arguments: JSON.stringify(value), input: { status: "valid", value }, attempt: 1 },
    proposed: {},
});

test("decide gets {trigger, proposed, session, owner} and its decision is the answer", async () => {
    const payload = { session: "s1", owner: "alice", trigger: { type: "session.start", session: "s1" }, proposed: {} };
    assert.deepEqual(await post(payload), { status: 200, json: { agent: { model: "scripted" } } });
    assert.deepEqual(seen.trigger, payload.trigger);
    assert.deepEqual(seen.proposed, {});
    assert.equal(seen.session, "s1");
    assert.equal(seen.owner, "alice");
    assert.ok(seen.signal instanceof AbortSignal);
});

test("a promise is awaited", async () => {
    const proposed = { actions: [{ type: "message.append", message: { role: "user", content: "hi" } }, { type: "model.prompt" }] };
    const res = await post({ session: "s1", trigger: { type: "message", message: { role: "user", content: "hi" } }, proposed });
    assert.deepEqual(res, { status: 200, json: proposed });
});

test("a tool result", async () => {
    const res = await post(execute("echo", { city: "Tokyo" }));
    assert.deepEqual(res, { status: 200, json: { actions: [{ type: "tool.result", result: { city: "Tokyo" } }] } });
});

test("a thrown error is a 500 with its message", async () => {
    assert.deepEqual(await post(execute("throws", {})), { status: 500, json: { error: "the tool broke" } });
});

test("no decision is a 500 that says what to return", async () => {
    const res = await post(execute("nothing", {}));
    assert.equal(res.status, 500);
    assert.match(res.json.error, /decide returned undefined for a tool\.execute trigger; return a decision/);
});

test("the deadline header aborts decide's signal", async () => {
    const deadline = new Date(Date.now() + 150).toISOString();
    const start = Date.now();
    const res = await post(execute("waits", {}), { headers: { "x-gateway-deadline": deadline } });
    assert.equal(res.status, 200);
    assert.match(res.json.actions[0].error, /^aborted: the deadline .* passed$/);
    assert.ok(Date.now() - start >= 100, "aborted before the deadline");
    assert.equal(seen.deadline.toISOString(), deadline);
});

test("a deadline further than a timer holds (24.8 days) does not abort decide's signal at once", async () => {
    const deadline = new Date(Date.now() + 30 * 24 * 3600 * 1000).toISOString();
    const payload = { ...execute("waits", {}), session: "s-far" }; // not test 6's call, which the helper remembers
    const gone = new AbortController();
    const answer = fetch(url, {
        method: "POST", signal: gone.signal, body: JSON.stringify(payload),
        headers: (() => {
            const ts = Math.floor(Date.now() / 1000);
            return { "content-type": "application/json", "x-gateway-timestamp": String(ts), "x-gateway-signature": sign(secret, ts, JSON.stringify(payload)), "x-gateway-deadline": deadline };
        })(),
    }).catch((err) => err.name);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(seen.session, "s-far", "decide runs");
    assert.equal(seen.signal.aborted, false, `aborted long before a deadline 30 days away: ${seen.signal.reason?.message}`);
    gone.abort(); // the request goes, and the run's signal aborts with it
    assert.equal(await answer, "AbortError");
});

test("refused requests", async (t) => {
    const payload = execute("echo", {});
    const cases = [
        { name: "wrong secret", over: { secret: "guess" }, status: 401, error: /^signature does not match/ },
        // The times are read as each request is made: read when the
        // cases were, the one from the future came within the window once
        // the cases before it had taken 5 s (a loaded machine).
        { name: "stale", over: () => ({ timestamp: Math.floor(Date.now() / 1000) - 301 }), status: 401, error: /outside the replay window: signed 30\ds ago/ },
        // 305, not 301: the second may turn between this line and the
        // worker's clock, which would bring 301 s within the window.
        { name: "from the future", over: () => ({ timestamp: Math.floor(Date.now() / 1000) + 305 }), status: 401, error: /outside the replay window: signed 30\ds in the future/ },
        { name: "unsigned", over: { headers: { "x-gateway-signature": "" } }, status: 401, error: /not signed/ },
        { name: "not JSON", over: { body: "{nope" }, status: 400, error: /not JSON/ },
        { name: "no trigger", over: { body: '{"session":"s1"}' }, status: 400, error: /not \{session, trigger, proposed\}/ },
        { name: "GET", over: { method: "GET" }, status: 405, error: /GET is not allowed/ },
        { name: "too large", over: { body: JSON.stringify({ pad: "x".repeat(65 << 20) }) }, status: 413, error: /larger than/ },
        // Refused before the body is read: a caller that cannot sign makes
        // the worker read nothing (it read up to the limit first, and said 413).
        { name: "unsigned and large", over: { headers: { "x-gateway-signature": "" }, body: JSON.stringify({ pad: "x".repeat(65 << 20) }) }, status: 401, error: /not signed/ },
    ];
    for (const c of cases) {
        await t.test(c.name, async () => {
            const res = await post(payload, typeof c.over === "function" ? c.over() : c.over);
            assert.equal(res.status, c.status);
            assert.match(res.json.error, c.error);
            assert.ok(!res.json.error.includes(secret));
        });
    }
});

test("decide gets the request's traceparent, when the gateway traces", async () => {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const payload = { session: "s1", trigger: { type: "message", message: { role: "user", content: "hi" } }, proposed: {} };
    await post(payload, { headers: { traceparent: tp } });
    assert.equal(seen.traceparent, tp);
    await post({ ...payload, id: "req_2" });
    assert.equal(seen.traceparent, undefined);
});

test("decide gets a sub-agent's parent, and delegate() builds tool.delegate", async () => {
    const payload = {
        session: "s1",
        trigger: { type: "message", message: { role: "user", content: "{}" } },
        proposed: { actions: [{ type: "model.prompt" }] },
        parent: { id: "call_1", name: "research", attempt: 1, depth: 1 },
    };
    await post(payload);
    assert.deepEqual(seen.parent, { id: "call_1", name: "research", attempt: 1, depth: 1 });
    // An id of its own: the same body signed in the same second is a replay.
    const res = await post({ id: "req_no_parent", session: "s1", trigger: { type: "session.start", session: "s1" }, proposed: {} });
    assert.equal(res.status, 200);
    assert.equal(seen.parent, undefined);

    assert.deepEqual(delegate({ model: "m", tools: [] }), { actions: [{ type: "tool.delegate", agent: { model: "m", tools: [] } }] });
    assert.deepEqual(delegate({ model: "m" }, { message: "hi" }).actions[0].message, "hi");
    assert.throws(() => delegate({}), /agent must be an agent config with a model/);
});
