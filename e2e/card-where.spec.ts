// The chat page's tool card says where a client call runs (data-where, the
// tool-where text) and shows the tool's own UI only in the tab that runs it.
// The page's socket is the fake of sdk.spec.ts: the spec plays the gateway,
// including the page ids and leases a second tab would cause.
import { expect, test, installFakeSocket } from "./support";

test("a confirm card follows its lease: elsewhere, waiting, then here with its buttons", async ({ page }) => {
    await installFakeSocket(page, { replaceWebSocket: true });
    await page.goto("/");
    const push = (frame: any) => page.evaluate((f) => (window as any).FakeSocket.last().push(f), frame);
    await page.evaluate(async () => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === 1);
        w.FakeSocket.last().accept();
    });
    await push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
    await expect(page.getByTestId("connection-status")).toHaveAttribute("data-state", "open");

    const call = { id: "c1", name: "confirm", attempt: 1, attempts: 1 };
    const input = { status: "valid", value: { question: "Delete the draft?" } };
    await push({ type: "message", seq: 1, message: { role: "assistant", content: "", toolUses: [{ id: "c1", name: "confirm", arguments: '{"question":"Delete the draft?"}' }] } });
    await push({ type: "tool.started", seq: 2, ...call, arguments: '{"question":"Delete the draft?"}', input, handler: "client", deadline: "2030-01-01T00:00:00Z", page: "other" });

    const card = page.locator('[data-testid="tool-card"][data-tool-id="c1"]');
    const where = card.getByTestId("tool-where");
    await expect(card).toHaveAttribute("data-where", "elsewhere");
    await expect(card).toHaveAttribute("data-local", "false");
    await expect(where).toHaveText("Running in another tab");
    await expect(card.getByTestId("confirm-approve")).toHaveCount(0);

    // The other tab closed: the attempt waits for a page.
    await push({ type: "tool.leased", seq: 3, ...call });
    await expect(card).toHaveAttribute("data-where", "waiting");
    await expect(where).toHaveText("Waiting for the page");

    // This tab takes it: the gateway delivers the call here, and confirm asks.
    await push({ type: "tool.leased", seq: 4, ...call, page: "me" });
    await push({ type: "tool.call", ...call, arguments: '{"question":"Delete the draft?"}', input, deadline: "2030-01-01T00:00:00Z" });
    await expect(card).toHaveAttribute("data-where", "here");
    await expect(card).toHaveAttribute("data-local", "true");
    await expect(where).toBeHidden();
    await expect(card.getByTestId("confirm-question")).toHaveText("Delete the draft?");
    await card.getByTestId("confirm-approve").click();
    await expect.poll(() => page.evaluate(() => (window as any).FakeSocket.last().sent.slice(1)))
        .toEqual([{ type: "tool.result", id: "c1", attempt: 1, result: { approved: true } }]);

    await push({ type: "tool.finished", seq: 5, id: "c1", ok: true, name: "confirm", result: '{"approved":true}' });
    await expect(card).toHaveAttribute("data-status", "done");
    await expect(card).not.toHaveAttribute("data-where", /.*/);
    await expect(card.getByTestId("confirm-answer")).toHaveText("You approved.");
});

test("a card whose lease leaves this tab hides the tool's UI", async ({ page }) => {
    await installFakeSocket(page, { replaceWebSocket: true });
    await page.goto("/");
    const push = (frame: any) => page.evaluate((f) => (window as any).FakeSocket.last().push(f), frame);
    await page.evaluate(async () => {
        const w = window as any;
        await w.until(() => w.FakeSocket.sockets.length === 1);
        w.FakeSocket.last().accept();
    });
    await push({ type: "session.opened", session: "s1", seq: 0, page: "me" });
    const call = { id: "c1", name: "confirm", attempt: 1, attempts: 1 };
    const input = { status: "valid", value: { question: "Sure?" } };
    await push({ type: "tool.started", seq: 1, ...call, arguments: '{"question":"Sure?"}', input, handler: "client", deadline: "2030-01-01T00:00:00Z", page: "me" });
    await push({ type: "tool.call", ...call, arguments: '{"question":"Sure?"}', input, deadline: "2030-01-01T00:00:00Z" });
    const card = page.locator('[data-testid="tool-card"][data-tool-id="c1"]');
    await expect(card.getByTestId("confirm-approve")).toBeVisible();

    await push({ type: "tool.leased", seq: 2, ...call, page: "other" });
    await expect(card).toHaveAttribute("data-where", "elsewhere");
    await expect(card.getByTestId("tool-where")).toHaveText("Running in another tab");
    await expect(card.getByTestId("tool-slot")).toBeHidden();

    // It comes back (the other tab stopped answering): the same question again.
    await push({ type: "tool.leased", seq: 3, ...call, page: "me" });
    await expect(card).toHaveAttribute("data-where", "here");
    await expect(card.getByTestId("confirm-approve")).toBeVisible();
});
