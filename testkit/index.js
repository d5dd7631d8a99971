/**
 * @clienttools/gateway-testkit: Playwright fixtures and helpers for the
 * end-to-end tests of a chat UI built on the client-tools gateway.
 * docs/testing.md is the guide; index.d.ts the typed API.
 *
 * - test: Playwright's test plus the fixtures `gateway` (the gateway binary,
 *   started once per worker with `gatewayOptions`, e.g. your --script),
 *   `baseURL` (the gateway's URL) and `wire` (the page's sockets to the
 *   gateway, recorded, for waiting on tool calls and injecting faults).
 * - startGateway(options): the binary as a child process (gateway.js).
 * - attachWire(page, options): the wire on any page (wire.js).
 * - installFakeSocket(page, options): a fake WebSocket that lets a test play
 *   the gateway's side frame by frame, with no gateway (fake-socket.js).
 * - replay(page, session): every event of a session, as the gateway records
 *   it: what a test asserts against, independently of what a page showed.
 *
 * @module testkit
 */

import { test as base, expect } from "@playwright/test";
import { fileURLToPath } from "node:url";
import { startGateway } from "./gateway.js";
import { attachWire, Wire, ToolCall } from "./wire.js";

export { expect, startGateway, attachWire, Wire, ToolCall };

/** The path of the fake WebSocket's browser script. */
export const fakeSocketPath = fileURLToPath(new URL("./fake-socket.js", import.meta.url));

/**
 * Adds the fake WebSocket (window.FakeSocket, window.MemoryStorage,
 * window.until, window.sleep) to every document page loads; with
 * replaceWebSocket, window.WebSocket is the fake, so the page's own code
 * talks to the test instead of a gateway.
 * @param {import("@playwright/test").Page} page
 * @param {{replaceWebSocket?: boolean}} [options]
 */
export async function installFakeSocket(page, options = {}) {
    await page.addInitScript({ path: fakeSocketPath });
    if (options.replaceWebSocket) {
        await page.addInitScript(() => {
            /** @type {any} */ (window).WebSocket = /** @type {any} */ (window).FakeSocket;
        });
    }
}

/**
 * Opens a second, tool-less socket to session from page (its cookie, so the
 * same browser) and returns every event the gateway replays from the start:
 * the gateway's own record of the session. The socket goes to options.url,
 * the gateway's WebSocket URL (`gateway.wsURL`: a page of another origin
 * needs it), or to /ws on the page's origin; it is marked (?testkit=replay),
 * and a wire passes it through unrecorded: it is not one of the page's.
 * @param {import("@playwright/test").Page} page
 * @param {string} session
 * @param {{timeout?: number, url?: string | URL}} [options]
 */
export async function replay(page, session, options = {}) {
    return page.evaluate(async ([session, timeout, given]) => {
        const url = new URL(given || "/ws", location.href);
        url.protocol = url.protocol === "https:" || url.protocol === "wss:" ? "wss:" : "ws:";
        url.searchParams.set("testkit", "replay");
        const ws = new WebSocket(url);
        /** @type {any[]} */
        const frames = [];
        return await new Promise((resolve, reject) => {
            let until = -1;
            const done = () => {
                clearTimeout(timer);
                ws.close(1000);
                resolve(frames);
            };
            const timer = setTimeout(() => {
                ws.close(1000);
                reject(new Error(`replay timed out after ${frames.length} events (until ${until})`));
            }, timeout);
            ws.onopen = () => ws.send(JSON.stringify({ type: "session.open", session, after: 0, tools: [] }));
            ws.onmessage = (e) => {
                const f = JSON.parse(e.data);
                if (f.type === "session.opened") {
                    until = f.seq;
                    if (until === 0) done();
                } else if (f.type === "error" && typeof f.seq !== "number" && until < 0) {
                    clearTimeout(timer);
                    ws.close(1000);
                    reject(new Error(`the gateway refused the replay of ${session}: ${f.code}: ${f.message}`));
                } else if (typeof f.seq === "number") {
                    frames.push(f);
                    if (f.seq >= until) done();
                }
            };
            ws.onclose = (e) => {
                if (until < 0) {
                    clearTimeout(timer);
                    reject(new Error(e.code === 1006
                        ? `the replay's socket to ${url.origin}${url.pathname} closed before it opened (1006: no gateway answered there; a page of another origin than the gateway's gives replay {url: gateway.wsURL})`
                        : `the gateway closed the replay: ${e.code} ${e.reason}`));
                }
            };
        });
    }, /** @type {const} */ ([session, options.timeout ?? 5000, options.url ? String(options.url) : ""]));
}

export const test = base.extend(/** @type {any} */ ({
    gatewayOptions: [{}, { scope: "worker", option: true }],
    gateway: [
        async (/** @type {any} */ { gatewayOptions }, /** @type {any} */ use) => {
            const gateway = await startGateway(gatewayOptions);
            try {
                await use(gateway);
            } finally {
                await gateway.stop();
            }
        },
        // gatewayOptions.timeout bounds the start: this, only a hang of it.
        { scope: "worker", timeout: 600_000 },
    ],
    baseURL: async (/** @type {any} */ { gateway }, /** @type {any} */ use) => {
        await use(gateway.url);
    },
    wireOptions: [{}, { option: true }],
    wire: async (/** @type {any} */ { page, wireOptions }, /** @type {any} */ use) => {
        await use(await attachWire(page, wireOptions));
    },
}));
