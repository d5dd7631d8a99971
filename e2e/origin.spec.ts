import { expect, test } from "./support";

// A page whose origin the gateway refuses learns why, from the close
// (4003 and its reason), and the SDK does not knock again: reconnecting
// would not change the answer.
test("a refused origin closes with 4003 and a reason, and the SDK does not retry", async ({ page, baseURL }) => {
    // The gateway serves 127.0.0.1; the same server reached as localhost is
    // another origin, which --origins does not allow.
    const other = new URL(baseURL!);
    other.hostname = "localhost";
    await page.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
    await page.goto(new URL("/healthz", other).href);
    const gateway = new URL("/ws", baseURL!).href.replace(/^http/, "ws");
    const out = await page.evaluate(async (url) => {
        const { connect, CLOSE } = await import("/static/gateway.js");
        const states: any[] = [];
        const client = connect({ url, storage: null });
        client.on("state", (s: any) => states.push(s));
        const deadline = Date.now() + 10_000;
        while (!states.some((s) => s.state === "closed") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        // Long enough for the first retry, had there been one.
        await new Promise((r) => setTimeout(r, 2000));
        return { states, forbidden: CLOSE.FORBIDDEN };
    }, gateway);
    expect(out.states.filter((s) => s.state === "connecting")).toHaveLength(1);
    const closed = out.states.find((s) => s.state === "closed");
    expect(closed.code).toBe(out.forbidden);
    expect(closed.reason).toContain("--origins");
    expect(closed.retryIn).toBeUndefined();
});
