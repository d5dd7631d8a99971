import { expect, test, Chat } from "./support";

test("get_weather runs in the worker and the model reads its result", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what's the weather in Tokyo");

    await expect(chat.messages("user").getByTestId("message-text")).toHaveText(["what's the weather in Tokyo"]);
    await expect(chat.reply("Let me check the weather in Tokyo.")).toBeVisible();
    const card = chat.cards("get_weather");
    await expect(card).toHaveCount(1);
    await expect(card).toHaveAttribute("data-handler", "worker");
    await expect(card).toHaveAttribute("data-local", "false");
    await expect(card.getByTestId("tool-args")).toContainText('"city": "Tokyo"');
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(card.getByTestId("tool-status")).toHaveText("Done");
    await expect(card.getByTestId("tool-result")).toContainText("It's clear in Tokyo.");
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();

    const [sent] = await chat.toolMessages("get_weather");
    expect(sent.isError ?? false).toBe(false);
    expect(sent.content).toContain("It's clear in Tokyo.");
    await expect(card.getByTestId("tool-transcript")).toContainText("It's clear in Tokyo.");
});

test("get_weather for an unknown city: the tool's error reaches the model", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what's the weather in Atlantis");

    const card = chat.cards("get_weather");
    await expect(card).toHaveAttribute("data-status", "error");
    await expect(card.getByTestId("tool-status")).toHaveText("Error");
    await expect(card.getByTestId("tool-error")).toContainText("No forecast for Atlantis.");
    await expect(card.getByTestId("tool-result")).toBeHidden();
    await expect(chat.reply("get_weather failed: No forecast for Atlantis.")).toBeVisible();
    await chat.idle();

    const [sent] = await chat.toolMessages("get_weather");
    expect(sent.isError).toBe(true);
    expect(sent.content).toContain("No forecast for Atlantis.");
});
