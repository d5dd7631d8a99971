/**
 * dom.js: the DOM helpers the chat page's modules share. must and clone
 * throw with a message naming what is missing, so a page whose markup
 * (web/chat.templ) lost a part fails loudly at once instead of rendering
 * half a chat.
 *
 * Exports: must(root, selector), clone(doc, templateId), idPart(s).
 *
 * @module dom
 */

/**
 * The first element under root that matches selector.
 * @param {ParentNode} root @param {string} selector @returns {HTMLElement}
 */
export function must(root, selector) {
    const el = root.querySelector(selector);
    if (!el) throw new Error(`chat: the page has no ${selector}`);
    return /** @type {HTMLElement} */ (el);
}

/**
 * A copy of the first element of <template id=id>'s content.
 * @param {Document} doc @param {string} id @returns {HTMLElement}
 */
export function clone(doc, id) {
    const tpl = doc.getElementById(id);
    if (!(tpl instanceof HTMLTemplateElement)) throw new Error(`chat: the page has no <template id="${id}">`);
    const el = tpl.content.firstElementChild?.cloneNode(true);
    if (!(el instanceof HTMLElement)) throw new Error(`chat: <template id="${id}"> is empty`);
    return el;
}

/**
 * s as part of an element id any selector takes: what is not a letter, a
 * digit, - or _ becomes _.
 * @param {string} s
 */
export function idPart(s) {
    return s.replace(/[^A-Za-z0-9_-]/g, "_");
}
