// A page whose clock is off reads the gateway's deadlines as the gateway
// means them: session.opened says the gateway's time (`now`), the SDK keeps
// the difference (client.clockSkew). A laptop 5 minutes behind showed
// confirm's 5 minutes as 10, one ahead showed none, and a tool that
// budgeted from ctx.deadline had 5 minutes too many or too few.
import { expect, test, Chat } from "./support";

const FIVE_MINUTES = 5 * 60_000;

for (const skew of [-FIVE_MINUTES, FIVE_MINUTES]) {
    const name = skew < 0 ? "5 minutes behind" : "5 minutes ahead";

    test(`a page whose clock is ${name} counts confirm's 5 minutes down from 5`, async ({ page }) => {
        await page.clock.install({ time: Date.now() + skew }); // the laptop's clock; time flows
        const chat = await Chat.open(page);
        await chat.send("delete my draft");
        const card = chat.cards("confirm");
        await expect(card).toHaveAttribute("data-status", "running");
        // 5 minutes, a moment more or less (the skew is measured as
        // session.opened arrives): not 10, and not none.
        await expect(card.getByTestId("tool-time")).toHaveText(/^times out in (5 min( \d s)?|4 min( \d+ s)?)$/);
        await card.getByTestId("confirm-deny").click();
        await chat.idle();
    });

    test(`a tool on a page whose clock is ${name} gets a deadline on that clock`, async ({ page }) => {
        await page.clock.install({ time: Date.now() + skew });
        await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
        await page.goto("/healthz"); // the gateway's origin, no chat page
        const seen = await page.evaluate(async () => {
            const { connect } = await import("/static/gateway.js");
            return new Promise<{ left: number; skew: number }>((resolve) => {
                // The demo's policy for never_answers: attempts of 1 s.
                const client = connect({ storage: null, tools: {
                    never_answers: (_args: unknown, ctx: any) => {
                        resolve({ left: ctx.deadline.getTime() - Date.now(), skew: client.clockSkew });
                        return new Promise(() => {});
                    },
                } });
                client.on("opened", () => client.send("test slow tool"));
            });
        });
        // The skew is measured as session.opened arrives, later than the
        // gateway's `now` by its way over: the time left may pass 1 s by as
        // much. Minutes off is what this tells apart.
        expect(seen.left, "ms left of the 1 s attempt, by the page's clock").toBeGreaterThan(0);
        expect(seen.left).toBeLessThan(1_500);
        expect(Math.abs(seen.skew + skew), "clockSkew, against the page's offset").toBeLessThan(5_000);
    });
}
