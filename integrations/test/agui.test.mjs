// AG-UI's own client (HttpAgent from @ag-ui/client) against the built
// gateway's POST /ag-ui: a run with a worker tool and a front-end tool the
// input declares; the front end runs it and answers in the next run's
// messages. docs/integrations.md.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";
import { startGateway, browser } from "../harness.mjs";

let gw;
before(async () => { gw = await startGateway(); });
after(async () => { await gw?.stop(); });

const frontEndTools = [{
    name: "get_local_time",
    description: "The user's local time and time zone.",
    parameters: { type: "object", properties: {} },
}];

test("a run with a worker tool and a front-end tool, answered in the next run", async () => {
    const fetch = browser();
    const agent = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-tools" });
    agent.addMessage({ id: "user-1", role: "user", content: "weather and time" });

    const types = [];
    let pending;
    await agent.runAgent({ tools: frontEndTools }, {
        onEvent: ({ event }) => { types.push(event.type); },
        onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; },
    });
    assert.equal(types[0], "RUN_STARTED");
    assert.equal(types.at(-1), "RUN_FINISHED");
    for (const t of ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]) {
        assert.ok(types.includes(t), `the run has ${t}`);
    }
    const calls = agent.messages.flatMap((m) => m.toolCalls ?? []);
    const weather = calls.find((c) => c.function.name === "get_weather");
    const time = calls.find((c) => c.function.name === "get_local_time");
    assert.deepEqual(JSON.parse(weather.function.arguments), { city: "Tokyo" });
    const weatherResult = agent.messages.find((m) => m.role === "tool" && m.toolCallId === weather.id);
    assert.equal(weatherResult.content, "It's clear in Tokyo.", "the worker tool ran on the server");
    assert.deepEqual(pending, [time.id], "the run ends with the front-end call pending");
    assert.ok(!agent.messages.some((m) => m.role === "tool" && m.toolCallId === time.id));

    // The front end runs its tool and answers in the next run.
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: time.id, content: JSON.stringify({ time: "12:00", timeZone: "Asia/Tokyo" }) });
    const answered = structuredClone(agent.messages); // what the answer's run posts
    const second = [];
    await agent.runAgent({ tools: frontEndTools }, { onEvent: ({ event }) => { second.push(event.type); } });
    assert.equal(second[0], "RUN_STARTED");
    assert.equal(second.at(-1), "RUN_FINISHED");
    assert.ok(!second.includes("RUN_ERROR"));
    const reply = agent.messages.at(-1);
    assert.equal(reply.role, "assistant");
    assert.match(reply.content, /get_weather returned: It's clear in Tokyo\./);
    assert.match(reply.content, /get_local_time returned: \{"time":"12:00","timeZone":"Asia\/Tokyo"\}/);

    // The same answer again is a duplicate: it settles nothing twice, and
    // the run has nothing to do.
    const third = [];
    await agent.runAgent({ tools: frontEndTools }, { onEvent: ({ event }) => { third.push(event.type); } });
    assert.deepEqual(third, ["RUN_STARTED", "RUN_FINISHED"]);

    // The answer's run posted again, as a retry would: it gets what
    // followed the answer again, and no second result for the call (the
    // front end's own tool message is its result).
    const retry = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-tools", initialMessages: answered });
    const again = [];
    await retry.runAgent({ tools: frontEndTools }, { onEvent: ({ event }) => { again.push(event); } });
    assert.ok(!again.some((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === time.id), "no second result for the answered call");
    assert.equal(retry.messages.filter((m) => m.role === "tool" && m.toolCallId === time.id).length, 1);
    assert.match(retry.messages.at(-1).content, /get_local_time returned/);
});

test("a front end's error answer is its call's result: no second one comes back", async () => {
    const agent = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch: browser(), threadId: "thread-refused" });
    agent.addMessage({ id: "user-1", role: "user", content: "what time is it" });
    let pending;
    await agent.runAgent({ tools: frontEndTools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; } });
    assert.equal(pending?.length, 1);
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: pending[0], content: "the user said no", error: "the user said no" });
    const events = [];
    await agent.runAgent({ tools: frontEndTools }, { onEvent: ({ event }) => { events.push(event); } });
    assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "the front end's tool message holds the error");
    assert.equal(agent.messages.filter((m) => m.role === "tool").length, 1);
});

test("a thread of another browser is not this browser's", async () => {
    const mine = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch: browser(), threadId: "thread-private" });
    mine.addMessage({ id: "user-1", role: "user", content: "hello" });
    await mine.runAgent({});
    assert.match(mine.messages.at(-1).content, /No rule for: hello/);

    // Another browser posting a tool result to the same threadId finds no
    // session: it cannot answer, or read, this browser's thread.
    const res = await browser()(`${gw.url}/ag-ui`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ threadId: "thread-private", runId: "r", messages: [{ id: "t", role: "tool", toolCallId: "call_1", content: "x" }], tools: [] }),
    });
    assert.equal(res.status, 404);
    assert.match(await res.text(), /no chat "thread-private" for this browser/);
});
