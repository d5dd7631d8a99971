import { expect, test, Chat, ofType } from "./support";

// The demo's sub-agent (docs/subagents.md): research_weather is delegated to
// a helper agent, which calls get_weather for three cities. The page shows
// the helper's text and calls inside research_weather's card, and the
// conversation shows only the session's own agent's words.
test("research_weather runs a helper agent whose calls nest in its card", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("research the weather in three cities");

    const card = chat.cards("research_weather");
    await expect(card).toHaveCount(1);
    const sub = card.getByTestId("tool-subagent");
    await expect(sub.getByTestId("subagent-head")).toHaveText("Sub-agent on scripted");
    // The helper's three calls are cards inside the parent's, not in the log.
    const nested = sub.locator('[data-testid="tool-card"][data-tool-name="get_weather"]');
    await expect(nested).toHaveCount(3);
    await expect(nested.nth(0).getByTestId("tool-args")).toContainText('"city": "San Francisco"');
    await expect(nested.nth(0)).toHaveAttribute("data-status", "done");
    await expect(nested.nth(1)).toHaveAttribute("data-status", "done");
    await expect(nested.nth(2)).toHaveAttribute("data-status", "error");
    await expect(nested.nth(2).getByTestId("tool-error")).toContainText("No forecast for Paris.");
    await expect(chat.cards("get_weather")).toHaveCount(3); // all of them nested
    await expect(page.locator('[data-testid="messages"] > [data-testid="tool-card"][data-tool-name="get_weather"]')).toHaveCount(0);

    // The helper's streamed text, both of its turns, in the card.
    const text = sub.getByTestId("subagent-text");
    await expect(text).toContainText("Researching San Francisco, Tokyo and Paris.");
    await expect(text).toContainText("get_weather returned: It's foggy in San Francisco.");

    // Its final message is the call's result, and the model's reply quotes it.
    const summary = "get_weather returned: It's foggy in San Francisco. get_weather returned: It's clear in Tokyo. get_weather failed: No forecast for Paris.";
    await expect(card).toHaveAttribute("data-status", "done");
    // The card's own parts; the helper's cards have theirs.
    await expect(card.locator(":scope > details").getByTestId("tool-result")).toContainText(summary);
    await expect(chat.reply(`The helper agent's research: ${summary}`)).toBeVisible();
    await chat.idle();

    // The conversation holds the session's agent alone: the user's message,
    // the two replies; none of the helper's text is an assistant message.
    await expect(chat.messages("assistant")).toHaveCount(2);
    await expect(chat.reply("Researching San Francisco")).toHaveCount(0);

    // On the wire: tool.delegated, then the helper's events with parent.
    const events = await chat.events();
    const [delegated] = ofType(events, "tool.delegated");
    expect(delegated).toMatchObject({ name: "research_weather", model: "scripted", tools: ["get_weather"], depth: 1 });
    const helpers = events.filter((e) => e.parent === delegated.id);
    expect(ofType(helpers, "tool.finished")).toHaveLength(3);
    expect(helpers.every((e) => e.seq! > delegated.seq!)).toBe(true);
    expect(ofType(helpers, "session.idle")).toHaveLength(0);

    // A reload rebuilds the nesting from the replay.
    await page.reload();
    await chat.connected();
    await expect(chat.cards("research_weather").getByTestId("tool-subagent").locator('[data-testid="tool-card"]')).toHaveCount(3);
    await expect(chat.cards("research_weather").getByTestId("subagent-text")).toContainText("Researching San Francisco");
});

// A sub-agent's browser tool: the helper behind ask_helper calls
// get_local_time, which this page runs (it holds the lease) and answers like
// any call; the helper's answer is ask_helper's result.
test("a sub-agent's browser tool runs in the page", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test sub-agent");

    const card = chat.cards("ask_helper");
    const nested = card.getByTestId("tool-subagent").locator('[data-testid="tool-card"][data-tool-name="get_local_time"]');
    await expect(nested).toHaveCount(1);
    await expect(nested).toHaveAttribute("data-local", "true");
    await expect(nested).toHaveAttribute("data-status", "done");
    await expect(nested.locator(":scope > details").getByTestId("tool-result")).toContainText('"timeZone"');
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(chat.reply(/ask_helper returned: Your page says it.s .+ in .+\./)).toBeVisible();
    await chat.idle();

    // The page answered the helper's call once, over the same frames as any.
    const events = await chat.events();
    const [call] = ofType(events, "tool.finished").filter((e) => e.name === "get_local_time");
    expect(call.parent).toBe(ofType(events, "tool.delegated")[0].id);
});
