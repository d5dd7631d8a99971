// The seed's example (examples/seed/server.mjs), served by serve() and asked
// as the gateway asks it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { serve, serverURL, sign } from "../index.mjs";
import { decide } from "../../../examples/seed/server.mjs";
import { closeServer } from "../testing/close.mjs";

const secret = "seed-test-secret";
let server;

before(async () => {
    server = await serve({ decide, secret, port: 0 });
});
after(() => closeServer(server));

async function ask(trigger, proposed = {}) {
    const body = JSON.stringify({ session: "s1", trigger, proposed });
    const ts = Math.floor(Date.now() / 1000);
    const res = await fetch(serverURL(server), {
        method: "POST",
        headers: { "content-type": "application/json", "x-gateway-timestamp": String(ts), "x-gateway-signature": sign(secret, ts, body) },
        body,
    });
    assert.equal(res.status, 200);
    return res.json();
}

const execute = (city) => ({
    type: "tool.execute", id: "call_1", name: "get_weather",
    arguments: JSON.stringify({ city }), input: { status: "valid", value: { city } }, attempt: 1,
    deadline: new Date(Date.now() + 60_000).toISOString(),
});

test("session.start declares get_weather", async () => {
    assert.deepEqual(await ask({ type: "session.start", session: "s1" }), {
        agent: {
            model: "claude-haiku-4-5-20251001",
            stream: true,
            tools: [{
                name: "get_weather",
                description: "Get the weather for a city.",
                input: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            }],
        },
    });
});

test("tool.execute runs get_weather", async (t) => {
    const cases = [
        { city: "San Francisco", want: { type: "tool.result", result: "It's foggy in San Francisco." } },
        { city: "Tokyo", want: { type: "tool.result", result: "It's clear in Tokyo." } },
        { city: "Atlantis", want: { type: "tool.error", error: "No forecast for Atlantis." } },
    ];
    for (const c of cases) {
        await t.test(c.city, async () => {
            assert.deepEqual(await ask(execute(c.city)), { actions: [c.want] });
        });
    }
});

test("other triggers get the proposal back", async () => {
    const proposed = {
        actions: [
            { type: "message.append", message: { role: "tool", content: "It's clear in Tokyo.", toolUseId: "call_1", name: "get_weather" } },
            { type: "model.prompt" },
        ],
    };
    const trigger = { type: "tool.finished", id: "call_1", ok: true, name: "get_weather", result: "\"It's clear in Tokyo.\"" };
    assert.deepEqual(await ask(trigger, proposed), proposed);
});
