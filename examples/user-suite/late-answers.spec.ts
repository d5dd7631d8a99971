// A gateway of its own for this file, whose browser tools time out after
// 1 s (--client-timeout): an answer the wire holds back longer arrives late.
import { expect, replay, test } from "@clienttools/gateway-testkit";
import { gatewayOptions } from "./options";

test.use({ gatewayOptions: { ...gatewayOptions, args: ["--client-timeout", "1s"] } });

test("an answer delayed past the attempt's deadline is refused; the call times out once", async ({ page, wire }) => {
    wire.delayAnswers("get_local_time", 3000);
    await page.goto("/");
    await page.getByTestId("prompt").fill("what time is it");
    await page.getByTestId("prompt").press("Enter");
    const call = await wire.toolCall("get_local_time");
    const reply = page.getByTestId("message").filter({ hasText: "I could not read your clock" });
    await expect(reply).toBeVisible();
    await expect(page.locator(`[data-tool-id="${call.id}"]`)).toHaveAttribute("data-status", "error");
    // The page answered at once; the wire lets it through 3 s later.
    await expect.poll(() => wire.refusals().length, { timeout: 15_000 }).toBeGreaterThan(0);
    expect(wire.refusals()[0].code).toBe("stale_attempt");
    const opened = await wire.waitForFrame((f) => f.type === "session.opened");
    const finished = (await replay(page, opened.session)).filter((e) => e.type === "tool.finished" && e.id === call.id);
    expect(finished).toHaveLength(1);
    expect(finished[0].code).toBe("timeout");
});
