// AG-UI's own client (HttpAgent from @ag-ui/client) against the built
// gateway's POST /ag-ui: a run with a worker tool and a front-end tool the
// input declares; the front end runs it and answers in the next run's
// messages; a run cut and run again with the messages the app holds; a
// message sent instead of a front-end tool's answer, and with it; what
// settled while no run was open. docs/integrations.md.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";
import { startGateway, browser, until } from "../harness.mjs";

let gw;
let slow; // a gateway whose client calls time out after 1s
before(async () => { [gw, slow] = await Promise.all([startGateway(), startGateway(["--client-timeout", "1s"])]); });
after(async () => { await Promise.all([gw?.stop(), slow?.stop()]); });

const texts = (agent) => agent.messages.map((m) => `${m.role}:${typeof m.content === "string" ? m.content : ""}`);

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

test("a run cut mid-reply and run again with the messages the app holds: the reply is completed, the message not sent twice", async () => {
    const fetch = browser();
    const first = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-cut" });
    first.addMessage({ id: "user-1", role: "user", content: "slow stream" });
    const running = first.runAgent({});
    await until(() => (first.messages.at(-1)?.content ?? "").split(" ").length >= 4 && first.messages.at(-1).role === "assistant", "the first words");
    first.abortRun(); // a reload, a lost connection
    await running.catch(() => {});
    const held = structuredClone(first.messages);
    const partial = held.at(-1).content;
    assert.ok(!partial.endsWith("twenty."), "the app holds part of the reply");

    // Run again with what the app holds, as a reloaded page does.
    const second = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-cut", initialMessages: held });
    await second.runAgent({});
    assert.deepEqual(texts(second), ["user:slow stream", "assistant:One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty."]);
    assert.equal(second.messages.at(-1).id, held.at(-1).id, "the rest came on the message the app had");

    // Cut before any reply: the same messages again are not a second question.
    const third = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-cut-early" });
    third.addMessage({ id: "user-1", role: "user", content: "slow stream" });
    const cut = third.runAgent({});
    third.abortRun();
    await cut.catch(() => {});
    const again = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-cut-early", initialMessages: [{ id: "user-1", role: "user", content: "slow stream" }] });
    await again.runAgent({});
    assert.deepEqual(texts(again), ["user:slow stream", "assistant:One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty."]);
    const edited = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch, threadId: "thread-cut-early", initialMessages: [{ id: "user-1", role: "user", content: "slow stream, edited" }] });
    await assert.rejects(edited.runAgent({}), /400: message "user-1" was sent before with other text/);
});

test("a message sent instead of a front-end tool's answer stops the call; one sent with the answer takes both", async () => {
    const agent = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch: browser(), threadId: "thread-instead" });
    agent.addMessage({ id: "user-1", role: "user", content: "what time is it" });
    let pending;
    await agent.runAgent({ tools: frontEndTools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; } });
    assert.equal(pending?.length, 1);
    agent.addMessage({ id: "user-2", role: "user", content: "hello" });
    await agent.runAgent({ tools: frontEndTools });
    const stopped = agent.messages.find((m) => m.role === "tool" && m.toolCallId === pending[0]);
    assert.match(stopped?.content ?? "", /get_local_time was cancelled: the user sent a new message instead of answering/);
    assert.deepEqual(stopped.metadata?.gateway, { error: true, code: "cancelled" }, "a failed call's message says so");
    assert.equal(agent.messages.at(-1).content, "No rule for: hello");

    const both = new HttpAgent({ url: `${gw.url}/ag-ui`, fetch: browser(), threadId: "thread-both" });
    both.addMessage({ id: "user-1", role: "user", content: "what time is it" });
    await both.runAgent({ tools: frontEndTools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; } });
    both.addMessage({ id: "tool-1", role: "tool", toolCallId: pending[0], content: JSON.stringify({ time: "12:00", timeZone: "UTC" }) });
    both.addMessage({ id: "user-2", role: "user", content: "hello" });
    await both.runAgent({ tools: frontEndTools });
    assert.deepEqual(texts(both).slice(-2), ['assistant:get_local_time returned: {"time":"12:00","timeZone":"UTC"}', "assistant:No rule for: hello"]);
});

test("what settled while no run was open comes first in the next message's run", async () => {
    const agent = new HttpAgent({ url: `${slow.url}/ag-ui`, fetch: browser(), threadId: "thread-missed" });
    agent.addMessage({ id: "user-1", role: "user", content: "what time is it" });
    let pending;
    await agent.runAgent({ tools: frontEndTools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; } });
    assert.equal(pending?.length, 1);
    // The app never answers, and no run is open when the call times out
    // and the model answers that; then the user writes. (The gateway's
    // timer fires on its own; the margin only spares a loaded machine.)
    await new Promise((r) => setTimeout(r, 3000));
    agent.addMessage({ id: "user-2", role: "user", content: "hello" });
    await agent.runAgent({ tools: frontEndTools });
    const timedOut = agent.messages.find((m) => m.role === "tool" && m.toolCallId === pending[0]);
    assert.match(timedOut?.content ?? "", /get_local_time timed out/);
    assert.deepEqual(timedOut.metadata?.gateway, { error: true, code: "timeout" });
    assert.ok(texts(agent).some((t) => /^assistant:get_local_time failed: get_local_time timed out/.test(t)), JSON.stringify(texts(agent)));
    assert.equal(agent.messages.at(-1).content, "No rule for: hello");
});

// What integrations.md gives an app whose threads grow long: the run posts
// the messages from the last assistant message on, which hold all the
// gateway reads (where the app stands, its answers, its new message).
class RecentAgent extends HttpAgent {
    requestInit(input) {
        const from = input.messages.findLastIndex((m) => m.role === "assistant");
        return super.requestInit({ ...input, messages: input.messages.slice(Math.max(from, 0)) });
    }
}

test("an agent that posts only the messages from the last assistant message on runs as one that posts them all", async () => {
    const fetch = browser();
    const posted = [];
    const recording = async (url, init) => {
        posted.push(JSON.parse(init.body).messages.map((m) => m.role));
        return fetch(url, init);
    };
    const agent = new RecentAgent({ url: `${gw.url}/ag-ui`, fetch: recording, threadId: "thread-recent" });
    agent.addMessage({ id: "user-1", role: "user", content: "what time is it" });
    let pending;
    await agent.runAgent({ tools: frontEndTools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => { pending = pendingToolCallIds; } });
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: pending[0], content: JSON.stringify({ time: "12:00", timeZone: "UTC" }) });
    await agent.runAgent({ tools: frontEndTools });
    agent.addMessage({ id: "user-2", role: "user", content: "hello" });
    await agent.runAgent({ tools: frontEndTools });
    assert.deepEqual(texts(agent), [
        "user:what time is it",
        "assistant:Asking your browser.",
        `tool:${JSON.stringify({ time: "12:00", timeZone: "UTC" })}`,
        'assistant:get_local_time returned: {"time":"12:00","timeZone":"UTC"}',
        "user:hello",
        "assistant:No rule for: hello",
    ]);
    assert.deepEqual(posted, [["user"], ["assistant", "tool"], ["assistant", "user"]], "each run posted the recent messages alone");
});
