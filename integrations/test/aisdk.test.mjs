// The AI SDK's own chat (AbstractChat with DefaultChatTransport, from the
// `ai` package as a useChat app runs it) against the built gateway's
// POST /api/chat and GET /api/chat/{id}/stream: a turn with a worker tool
// and a client tool answered in onToolCall with addToolOutput, a worker
// tool that asks approval (addToolApprovalResponse), a client tool that
// times out, a resumed stream, and Stop with the cancel route.
// docs/integrations.md.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import { startGateway, browser, until } from "../harness.mjs";

// State is the smallest ChatState: the messages in an array.
class State {
    status = "ready";
    error = undefined;
    messages = [];
    pushMessage(m) { this.messages = [...this.messages, m]; }
    popMessage() { this.messages = this.messages.slice(0, -1); }
    replaceMessage(i, m) { this.messages = this.messages.map((old, j) => (j === i ? m : old)); }
    snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
    constructor(init) {
        super({ ...init, state: new State() });
    }
}

let gw;
let slow; // a gateway whose client calls time out after 1s
before(async () => {
    [gw, slow] = await Promise.all([startGateway(), startGateway(["--client-timeout", "1s"])]);
});
after(async () => {
    await Promise.all([gw?.stop(), slow?.stop()]);
});

function transport(url, fetch) {
    return new DefaultChatTransport({ api: `${url}/api/chat`, fetch });
}

const lastAssistant = (chat) => chat.messages.findLast((m) => m.role === "assistant");
const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const toolPart = (m, name) => m.parts.find((p) => p.type === `tool-${name}`);
/** Waits until the chat's reply has its first words: mid-stream. */
const firstWords = (chat) => until(() => {
    const m = lastAssistant(chat);
    return m && textOf(m).split(" ").length >= 3;
}, "the first words");

test("a turn with a worker tool and a client tool answered by onToolCall and addToolOutput", async () => {
    const fetch = browser();
    const ran = [];
    const chat = new Chat({
        id: "chat-tools",
        transport: transport(gw.url, fetch),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => {
            ran.push(toolCall.toolName);
            if (toolCall.toolName === "get_local_time") {
                // Not awaited: onToolCall runs inside the stream's processing.
                chat.addToolOutput({ tool: "get_local_time", toolCallId: toolCall.toolCallId, output: { time: "12:00", timeZone: "Asia/Tokyo" } });
            }
        },
    });
    await chat.sendMessage({ text: "weather and time" });
    await until(() => chat.status === "ready" && textOf(lastAssistant(chat)).includes("get_local_time returned"), "the reply after the tools");

    assert.deepEqual(ran, ["get_local_time"], "only the client tool runs in the app; the worker's runs on the server");
    assert.equal(chat.error, undefined);
    const reply = lastAssistant(chat);
    const weather = toolPart(reply, "get_weather");
    assert.equal(weather.state, "output-available");
    assert.equal(weather.providerExecuted, true);
    assert.deepEqual(weather.input, { city: "Tokyo" });
    assert.equal(weather.output, "It's clear in Tokyo.");
    const time = toolPart(reply, "get_local_time");
    assert.equal(time.state, "output-available");
    assert.deepEqual(time.output, { time: "12:00", timeZone: "Asia/Tokyo" });
    const text = textOf(reply);
    assert.match(text, /^Checking the weather and your clock\./);
    assert.match(text, /get_weather returned: It's clear in Tokyo\./);
    assert.match(text, /get_local_time returned: \{"time":"12:00","timeZone":"Asia\/Tokyo"\}/);
    assert.equal(chat.messages.filter((m) => m.role === "assistant").length, 1, "the follow-up continues the same assistant message");

    // The same request again (a retried POST): nothing is new, and its
    // metadata says where the chat stands, so posting it back replays nothing.
    const seq = reply.metadata.gateway.seq;
    assert.ok(seq > 0);
    for (let i = 0; i < 2; i++) {
        const res = await fetch(`${gw.url}/api/chat`, {
            method: "POST", headers: { "content-type": "application/json" },
            body: JSON.stringify({ id: "chat-tools", trigger: "submit-message", messages: chat.messages }),
        });
        assert.equal(res.status, 200);
        const chunks = (await res.text()).split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));
        assert.deepEqual(chunks.map((c) => c.type), ["start", "finish"], "nothing new to stream");
        assert.deepEqual(chunks.map((c) => c.messageMetadata.gateway.seq), [seq, seq]);
    }
});

test("a worker tool that asks approval is asked in the stream, and addToolApprovalResponse answers it", async () => {
    for (const approved of [true, false]) {
        const chat = new Chat({
            id: `chat-approval-${approved}`,
            transport: transport(gw.url, browser()),
            sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
        });
        await chat.sendMessage({ text: "delete my notes" });
        const asked = toolPart(lastAssistant(chat), "delete_file");
        assert.equal(asked.state, "approval-requested", JSON.stringify(asked));
        assert.deepEqual(asked.input, { path: "notes.txt" });
        assert.equal(asked.providerExecuted, true); // the server runs it, once approved
        await chat.addToolApprovalResponse({ id: asked.approval.id, approved });
        await until(() => ["output-available", "output-error"].includes(toolPart(lastAssistant(chat), "delete_file").state) && chat.status === "ready",
            "the call's outcome after the answer");
        const done = toolPart(lastAssistant(chat), "delete_file");
        if (approved) {
            assert.equal(done.state, "output-available", JSON.stringify(done));
        } else {
            assert.equal(done.state, "output-error", JSON.stringify(done));
            assert.match(done.errorText, /denied|did not approve|declined/i);
        }
        assert.equal(chat.messages.filter((m) => m.role === "assistant").length, 1, "one assistant message for the turn");
    }
});

test("a client tool that times out surfaces as tool-output-error; the late answer is refused", async () => {
    const fetch = browser();
    let pending;
    const chat = new Chat({
        id: "chat-timeout",
        transport: transport(slow.url, fetch),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => { pending = toolCall; }, // answers too late, below
    });
    await chat.sendMessage({ text: "what time is it" });
    await until(() => chat.status === "ready" && pending, "the client call");
    const part = toolPart(lastAssistant(chat), "get_local_time");
    assert.equal(part.state, "input-available", "the stream ended with the tool pending");
    const { deadline } = part.callProviderMetadata.gateway;
    assert.ok(deadline, "the attempt's deadline travels with the call");

    // Answer after the attempt's deadline (the gateway's timer fires on its
    // own; the margin only spares a loaded machine).
    const wait = Date.parse(deadline) - Date.now() + 1500;
    await new Promise((r) => setTimeout(r, Math.max(wait, 0)));
    chat.addToolOutput({ tool: "get_local_time", toolCallId: pending.toolCallId, output: { time: "late", timeZone: "UTC" } });
    await until(() => chat.status === "ready" && textOf(lastAssistant(chat)).includes("get_local_time failed"), "the reply after the timeout");

    const settled = toolPart(lastAssistant(chat), "get_local_time");
    assert.equal(settled.state, "output-error", "the call failed on the server: the app's late output does not count");
    assert.match(settled.errorText, /get_local_time timed out: 1 attempt of 1s, no answer from the browser/);
    assert.match(textOf(lastAssistant(chat)), /get_local_time failed: get_local_time timed out/);
    assert.equal(chat.error, undefined);
});

test("a client call with malformed arguments is answered by the gateway; the app never runs it", async () => {
    const ran = [];
    const chat = new Chat({
        id: "chat-broken",
        transport: transport(gw.url, browser()),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => { ran.push(toolCall.toolName); },
    });
    await chat.sendMessage({ text: "broken clock" });
    await until(() => chat.status === "ready" && textOf(lastAssistant(chat)).includes("get_local_time failed"), "the reply after the refused call");
    assert.deepEqual(ran, []);
    const part = toolPart(lastAssistant(chat), "get_local_time");
    assert.equal(part.state, "output-error");
    assert.match(part.errorText, /not a JSON object/);
    assert.equal(chat.error, undefined);
});

test("a stream cut mid-reply resumes from the session's log (resume: the GET route)", async () => {
    const fetch = browser();
    const first = new Chat({ id: "chat-resume", transport: transport(gw.url, fetch) });
    const sent = first.sendMessage({ text: "slow stream" });
    await firstWords(first);
    await first.stop(); // the page goes away mid-stream
    await sent;
    const partial = textOf(lastAssistant(first));
    assert.ok(!partial.endsWith("twenty."), "the first page saw only part of the reply");

    // A new page of the same browser and chat, with nothing of its own:
    // what a reload with resume: true does.
    const second = new Chat({ id: "chat-resume", transport: transport(gw.url, fetch) });
    await second.resumeStream();
    await until(() => second.status === "ready", "the resumed stream's end");
    const reply = lastAssistant(second);
    assert.ok(reply, "the resumed stream rebuilt the reply");
    assert.equal(textOf(reply), "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty.");
    assert.equal(reply.id, lastAssistant(first).id, "the same message, by the id the gateway gave it");

    // Once the reply is done there is nothing to resume: 204.
    const res = await fetch(`${gw.url}/api/chat/chat-resume/stream`);
    assert.equal(res.status, 204);
    // Another browser cannot resume this chat: to it, the chat does not exist.
    const other = await browser()(`${gw.url}/api/chat/chat-resume/stream`);
    assert.equal(other.status, 204);
});

test("Stop with the cancel route stops the turn: the next message's answer starts clean", async () => {
    const fetch = browser();
    const chat = new Chat({ id: "chat-stop", transport: transport(gw.url, fetch) });
    const sent = chat.sendMessage({ text: "slow stream" });
    await firstWords(chat);
    // The app's Stop button, as docs/integrations.md writes it.
    await chat.stop();
    const res = await fetch(`${gw.url}/api/chat/${encodeURIComponent(chat.id)}/cancel`, { method: "POST" });
    assert.equal(res.status, 204);
    await sent;
    await chat.sendMessage({ text: "hello" });
    await until(() => chat.status === "ready", "the next answer");
    assert.equal(textOf(lastAssistant(chat)), "No rule for: hello", "the stopped reply did not run on into the next answer");
});

test("a message sent while a client call waits stops that call: the app runs it once, and the message is answered", async () => {
    const ran = [];
    const chat = new Chat({
        id: "chat-instead",
        transport: transport(gw.url, browser()),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => { ran.push(toolCall.toolCallId); }, // the user never answers
    });
    await chat.sendMessage({ text: "what time is it" });
    await until(() => chat.status === "ready" && ran.length === 1, "the client call");
    assert.equal(toolPart(lastAssistant(chat), "get_local_time").state, "input-available");

    await chat.sendMessage({ text: "hello" });
    await until(() => chat.status === "ready" && textOf(lastAssistant(chat)) === "No rule for: hello", "the answer to the new message");
    assert.deepEqual(ran, [ran[0]], "onToolCall ran once: the call was not delivered again");
    assert.equal(chat.error, undefined);
    const reply = lastAssistant(chat);
    assert.match(reply.id, /^msg_/, "the response's message has the gateway's id, so a resume finds it");
    const stopped = toolPart(reply, "get_local_time");
    assert.equal(stopped.toolCallId, ran[0]);
    assert.equal(stopped.state, "output-error", JSON.stringify(stopped));
    assert.equal(stopped.providerExecuted, true, "the gateway settled it; the app runs nothing");
    assert.match(stopped.errorText, /get_local_time was cancelled: the user sent a new message instead of answering/);
    assert.deepEqual(chat.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
});

test("the same user message posted again (a stream lost before any reply) is answered once", async () => {
    const fetch = browser();
    const chat = new Chat({ id: "chat-again", transport: transport(gw.url, fetch) });
    const sent = chat.sendMessage({ text: "slow stream" });
    await until(() => chat.status === "submitted" || chat.status === "streaming", "the request");
    await chat.stop(); // the stream is lost before the reply's first words
    await sent;
    if (chat.messages.at(-1).role === "assistant") chat.messages = chat.messages.slice(0, -1); // keep what a reload before any reply holds
    assert.equal(chat.messages.at(-1).role, "user");

    // As integrations.md says: a follow-up first, sendMessage() with no
    // message, which posts the same messages again.
    await chat.sendMessage();
    await until(() => chat.status === "ready", "the reply");
    assert.equal(textOf(lastAssistant(chat)), "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty.");
    assert.deepEqual(chat.messages.map((m) => m.role), ["user", "assistant"]);
    assert.match(lastAssistant(chat).id, /^msg_/, "the message's own response, by the id the gateway gave it");
});
