import { expect, test, Chat, ofType } from "./support";

// delete_file declares approval "always": each call asks the user in its
// card before it runs (the demo script's "test approval").

test("approve: the call runs once, after the user says yes", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test approval");
    const card = chat.cards("delete_file");
    await expect(card.getByTestId("tool-status")).toHaveText("Needs approval");
    await expect(card.getByTestId("tool-approval")).toContainText('"path": "notes.txt"');
    await card.getByTestId("approve").click();
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(card.getByTestId("tool-approval")).toBeHidden();
    await chat.idle();
    const events = await chat.events();
    expect(ofType(events, "tool.approved")[0]).toMatchObject({ approved: true });
    expect(ofType(events, "tool.started")).toHaveLength(1);
    expect(ofType(events, "tool.finished")[0]).toMatchObject({ ok: true, result: "Deleted notes.txt." });
});

test("deny: the call never runs, and the model reads that the user said no", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test approval");
    const card = chat.cards("delete_file");
    await card.getByTestId("deny").click();
    await expect(card).toHaveAttribute("data-status", "error");
    await chat.idle();
    const events = await chat.events();
    expect(ofType(events, "tool.started")).toHaveLength(0);
    expect(ofType(events, "tool.finished")[0]).toMatchObject({ ok: false, code: "denied" });
    const [sent] = await chat.toolMessages("delete_file");
    expect(sent.content).toContain("The user denied delete_file");
});

test("reload while asking: the question is asked again, and the answer counts", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test approval");
    await expect(chat.cards("delete_file").getByTestId("tool-approval")).toBeVisible();
    await page.reload();
    await chat.connected();
    const card = chat.cards("delete_file");
    await card.getByTestId("approve").click();
    await expect(card).toHaveAttribute("data-status", "done");
    expect(ofType(await chat.events(), "tool.started")).toHaveLength(1);
});

test("two tabs: the first answer wins, and the other tab stops asking", async ({ page, context }) => {
    const one = await Chat.open(page);
    await one.send("test approval");
    await expect(one.cards("delete_file").getByTestId("tool-approval")).toBeVisible();
    const two = await Chat.join(await context.newPage(), await one.session());
    await expect(two.cards("delete_file").getByTestId("tool-approval")).toBeVisible();

    await two.cards("delete_file").getByTestId("approve").click();
    await expect(one.cards("delete_file").getByTestId("tool-approval")).toBeHidden();
    await expect(one.cards("delete_file")).toHaveAttribute("data-status", "done");
    const events = await one.events();
    expect(ofType(events, "tool.approved")).toHaveLength(1);
    expect(ofType(events, "tool.started")).toHaveLength(1);
});

test("Stop while asking: the question goes, the call is cancelled, and the page says it stopped", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("test approval");
    const card = chat.cards("delete_file");
    await expect(card.getByTestId("tool-approval")).toBeVisible();
    await page.getByTestId("stop").click();
    await expect(card).toHaveAttribute("data-status", "error");
    await expect(card.getByTestId("tool-approval")).toBeHidden();
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toHaveCount(1);
    await chat.idle();
    expect(ofType(await chat.events(), "tool.finished")[0]).toMatchObject({ ok: false, code: "cancelled" });
    // A reload rebuilds the same: no question to answer, one notice.
    await page.reload();
    await chat.connected();
    await expect(chat.cards("delete_file")).toHaveAttribute("data-status", "error");
    await expect(chat.cards("delete_file").getByTestId("tool-approval")).toBeHidden();
    await expect(page.getByTestId("notice").filter({ hasText: "Stopped." })).toHaveCount(1);
});
