/**
 * composer.js: the chat page's message box and its buttons. Enter sends
 * (Shift+Enter is a new line, and nothing is sent while an input method
 * composes); Send becomes Stop while a turn runs, and the focus stays on
 * the button under the user's finger as they swap. The second click of a
 * double-click on Send, and a key press on Stop in the half second after
 * it took Send's place (a second Enter), stop nothing: they were meant for
 * Send. A single click stops at once, and so does Escape in the box or on
 * Stop.
 *
 * Exports: mountComposer(form, {submit, cancel}), which returns
 * {running(on)}: whether Stop shows.
 *
 * @module composer
 */

import { must } from "./dom.js";

/** A key press on Stop does nothing this long (ms) after it takes Send's place. */
const STOP_GRACE = 500;

/**
 * Wires form (web/chat.templ's composer).
 * @param {HTMLFormElement} form
 * @param {{submit: (text: string) => boolean, cancel: () => void}} on
 *   submit sends the box's text and reports whether it went (the box is
 *   then emptied); cancel is Stop's.
 */
export function mountComposer(form, { submit, cancel }) {
    const doc = form.ownerDocument;
    const prompt = /** @type {HTMLTextAreaElement} */ (must(form, "[data-testid=prompt]"));
    const send = /** @type {HTMLButtonElement} */ (must(form, "[data-testid=send]"));
    const stop = /** @type {HTMLButtonElement} */ (must(form, "[data-testid=stop]"));
    let running = false, stopShown = 0;

    form.addEventListener("submit", (e) => {
        e.preventDefault();
        const text = prompt.value.trim();
        if (text && submit(text)) prompt.value = "";
    });
    prompt.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            form.requestSubmit();
        }
    });
    form.addEventListener("keydown", (e) => {
        if (e.key === "Escape" && running && !e.isComposing) {
            e.preventDefault();
            cancel();
        }
    });
    stop.addEventListener("click", (e) => {
        // detail: the click's count; 0 for a key press.
        if (e.detail > 1 || (e.detail === 0 && performance.now() - stopShown < STOP_GRACE)) return;
        cancel();
    });

    return {
        /** Shows Stop (on) or Send. @param {boolean} on */
        running(on) {
            // As it is (the template starts with Send): the chat asks at each event.
            if (on === running) return;
            if (on) stopShown = performance.now();
            running = on;
            const hadFocus = doc.activeElement === send || doc.activeElement === stop;
            send.hidden = on;
            stop.hidden = !on;
            stop.disabled = !on;
            if (hadFocus) (on ? stop : send).focus({ preventScroll: true }); // in view: the page must not move
        },
    };
}
