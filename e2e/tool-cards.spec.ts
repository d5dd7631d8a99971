// A tool card is one line (name, handler, status, time) that unfolds to the
// arguments, the attempts and the result; times read "46 ms", "2.1 s",
// "times out in 4 min 59 s", never as ISO stamps.
import { expect, test, Chat } from "./support";

const ISO = /\d{4}-\d\d-\d\dT\d\d:\d\d/;

test("a card is one line that unfolds to its arguments and result", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("what's the weather in Tokyo");
    const card = chat.cards("get_weather");
    await expect(card).toHaveAttribute("data-status", "done");
    await chat.idle();

    // Folded: one line saying what ran, how it went, and how long it took.
    const summary = card.locator("summary").first();
    await expect(summary).toBeVisible();
    await expect(card.getByTestId("tool-name")).toHaveText("get_weather");
    await expect(card.getByTestId("tool-status")).toHaveText("Done");
    await expect(card.getByTestId("tool-time")).toHaveText(/^\d+ ms$|^\d+(\.\d)? s$/);
    await expect(card.getByTestId("tool-args")).toBeHidden();
    await expect(card.getByTestId("tool-result")).toBeHidden();
    const box = (await card.boundingBox())!;
    expect(box.height, "the folded card is one line").toBeLessThan(56);
    expect(await card.innerText()).not.toMatch(ISO);

    // Unfolded from the keyboard: the details.
    await summary.focus();
    await page.keyboard.press("Enter");
    await expect(card.getByTestId("tool-args")).toBeVisible();
    await expect(card.getByTestId("tool-args")).toHaveText('{ "city": "Tokyo" }');
    await expect(card.getByTestId("tool-result")).toBeVisible();
    await expect(card.getByTestId("tool-result")).toContainText("It's clear in Tokyo.");
    await expect(card.getByTestId("tool-transcript")).toBeVisible();
    await page.keyboard.press("Enter");
    await expect(card.getByTestId("tool-args")).toBeHidden();
});

test("a waiting call shows its question unfolded, and counts down to its timeout", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("delete my draft");
    const card = chat.cards("confirm");
    await expect(card).toHaveAttribute("data-status", "running");
    // The tool's own UI needs no click to be seen.
    await expect(card.getByTestId("confirm-question")).toBeVisible();
    await expect(card.getByTestId("tool-args")).toBeHidden();

    const time = card.getByTestId("tool-time");
    await expect(time).toHaveText(/^times out in (\d+ min( \d+ s)?|\d+ s)$/);
    const before = await time.textContent();
    await expect(time).not.toHaveText(before!, { timeout: 3000 });
    expect(await card.innerText()).not.toMatch(ISO);

    await card.getByTestId("confirm-approve").click();
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(time).toHaveText(/^\d+ ms$|^\d+(\.\d)? s$/);
});

test("a retried call says when it tries again, and its failed attempts unfold", async ({ page }) => {
    const chat = await Chat.open(page);
    // The wait between attempts is about 200 ms: too short to catch from
    // here on a busy machine, so the page notes every status the card shows.
    await page.evaluate(() => {
        const w = window as any;
        w.__statuses = [];
        new MutationObserver(() => {
            const s = document.querySelector('[data-tool-name="never_answers"] [data-testid="tool-status"]')?.textContent;
            if (s && s !== w.__statuses.at(-1)) w.__statuses.push(s);
        }).observe(document.querySelector('[data-testid="messages"]')!, { subtree: true, childList: true, characterData: true });
    });
    await chat.send("test slow tool");
    const card = chat.cards("never_answers");
    await expect(card).toHaveAttribute("data-status", "error", { timeout: 5000 });
    const statuses: string[] = await page.evaluate(() => (window as any).__statuses);
    expect(statuses).toContain("Running");
    expect(statuses).toContainEqual(expect.stringMatching(/^Retrying in \d+ ms$/));
    expect(statuses.at(-1)).toBe("Error");
    await card.locator("summary").first().click();
    await expect(card.getByTestId("tool-failure")).toHaveText([/^Attempt 1 of 2 failed \(timeout\): .* Next try after \d+ ms\.$/]);
    await expect(card.getByTestId("tool-error")).toBeVisible();
    await expect(card.getByTestId("tool-time")).toHaveText(/^\d+(\.\d)? s$/);
});
