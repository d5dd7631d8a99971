import { expect, test, Chat, ofType } from "./support";

test.describe("get_local_time", () => {
    test.use({ timezoneId: "Asia/Tokyo" });

    test("runs in the page and its result reaches the model", async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.recordFrames();
        await chat.send("what time is it");

        await expect(chat.reply("Let me ask your page for the time.")).toBeVisible();
        const card = chat.cards("get_local_time");
        await expect(card).toHaveAttribute("data-handler", "client");
        await expect(card).toHaveAttribute("data-local", "true");
        await expect(card).toHaveAttribute("data-status", "done");
        await expect(card.getByTestId("tool-result")).toContainText('"timeZone": "Asia/Tokyo"');
        await expect(chat.reply("Your page says it's")).toContainText("in Asia/Tokyo.");
        await chat.idle();

        // The page answered once, with the time in its own zone.
        const answers = (await chat.sent()).filter((f) => f.type === "tool.result" || f.type === "tool.error");
        expect(answers).toHaveLength(1);
        expect(answers[0].type).toBe("tool.result");
        expect(answers[0].attempt).toBe(1);
        expect(answers[0].result.timeZone).toBe("Asia/Tokyo");
        expect(answers[0].result.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+09:00$/);

        // The model was given exactly that result.
        const [sent] = await chat.toolMessages("get_local_time");
        expect(sent.isError ?? false).toBe(false);
        expect(JSON.parse(sent.content)).toEqual(answers[0].result);
        await expect(chat.reply("Your page says it's").getByTestId("message-text"))
            .toHaveText(`Your page says it's ${answers[0].result.time} in Asia/Tokyo.`);
    });
});

test("set_theme switches the page's theme", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("switch to dark theme");
    await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
    await expect(chat.reply("Done: the page uses the dark theme now.")).toBeVisible();
    const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await chat.idle();

    await chat.send("light theme");
    await expect(page.locator("html")).toHaveAttribute("data-theme", "light");
    await expect(chat.reply("Done: the page uses the light theme now.")).toBeVisible();
    const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(light).not.toBe(dark);
    const sent = await chat.toolMessages("set_theme");
    expect(sent.map((m) => JSON.parse(m.content))).toEqual([{ theme: "dark" }, { theme: "light" }]);
});

for (const [button, approved, reply] of [
    ["Approve", true, "Okay, I deleted your draft."],
    ["Deny", false, "Okay, I kept your draft."],
] as const) {
    test(`confirm waits for the user: ${button}`, async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.send("delete my draft");

        await expect(chat.reply("I'll ask you first.")).toBeVisible();
        const card = chat.cards("confirm");
        await expect(card.getByTestId("confirm-question")).toHaveText("Delete your draft?");
        await expect(card).toHaveAttribute("data-status", "running");
        // Nothing happens until the user decides.
        await page.waitForTimeout(300);
        await expect(chat.reply(reply)).toHaveCount(0);

        await card.getByRole("button", { name: button }).click();
        await expect(card.getByTestId("confirm-answer")).toHaveText(approved ? "You approved." : "You denied.");
        await expect(card).toHaveAttribute("data-status", "done");
        await expect(card.getByTestId("confirm-approve")).toBeDisabled();
        await expect(chat.reply(reply)).toBeVisible();
        await chat.idle();

        const [sent] = await chat.toolMessages("confirm");
        expect(JSON.parse(sent.content)).toEqual({ approved });
        expect(ofType(await chat.events(), "tool.finished")).toHaveLength(1);
    });
}

test("confirm is reachable by keyboard", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const approve = chat.cards("confirm").getByTestId("confirm-approve");
    await expect(approve).toBeVisible();
    // From the message box, Shift+Tab walks back into the log: Deny, then Approve.
    await page.getByTestId("prompt").focus();
    await page.keyboard.press("Shift+Tab");
    await expect(chat.cards("confirm").getByTestId("confirm-deny")).toBeFocused();
    await page.keyboard.press("Shift+Tab");
    await expect(approve).toBeFocused();
    await page.keyboard.press("Enter");
    await expect(chat.reply("Okay, I deleted your draft.")).toBeVisible();
});
