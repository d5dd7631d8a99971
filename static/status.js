/**
 * status.js: the chat page's connection status line, from the client's
 * `state` events: "Connecting…", "Connected", "Offline, retrying in 3s"
 * (counting down to the next try, a second at a time), "Refused: …" for a
 * page whose origin the gateway refuses, or "Offline".
 *
 * Exports: mountStatus(el, client), which returns a function that stops it.
 *
 * @module status
 */

import { CLOSE } from "./codes.js";

/** @typedef {import("./gateway.js").GatewayClient} GatewayClient */

const STATE_TEXT = { connecting: "Connecting…", open: "Connected", closed: "Offline" };

/**
 * Keeps el's text and data-state in step with client's connection.
 * @param {HTMLElement} el @param {GatewayClient} client @returns {() => void}
 */
export function mountStatus(el, client) {
    /** @type {ReturnType<typeof setInterval> | undefined} */
    let countdown;
    const off = client.on("state", ({ state, retryIn, code, reason }) => {
        el.dataset.state = state;
        clearInterval(countdown);
        if (state === "closed" && retryIn !== undefined) {
            const at = Date.now() + retryIn;
            const show = () => { el.textContent = `Offline, retrying in ${Math.max(1, Math.ceil((at - Date.now()) / 1000))}s`; };
            show();
            countdown = setInterval(show, 1000);
            return;
        }
        el.textContent = code === CLOSE.FORBIDDEN ? `Refused: ${reason}` : STATE_TEXT[/** @type {keyof STATE_TEXT} */ (state)] ?? state;
    });
    return () => {
        off();
        clearInterval(countdown);
    };
}
