/**
 * mdfragment.js makes the model's Markdown into DOM the chat page can show,
 * safely: GFM (bold, lists, tables, links, fenced code) parsed by marked,
 * then cleaned by DOMPurify, both vendored under ./vendor/ (see `make
 * vendor`). markdown.js renders a reply with it as the reply streams.
 *
 * What the model writes is never live HTML: raw HTML in the Markdown is
 * shown as text, images become links (nothing loads from a URL the model
 * chose), and DOMPurify keeps only the tags Markdown makes. Links open in a
 * new tab with rel="noopener noreferrer". Each code block gets a Copy button,
 * whose outcome it says through a bubbling `announce` event (announce.js).
 * A text or a block marked cannot read (it throws on a few) is shown as
 * plain paragraphs.
 *
 * Exports: lex(text), toSafeFragment(doc, text), blockFragment(doc, token),
 * madeTogether(doc, tokens), plainFragment(doc, text). Stateless, but for
 * the sanitizer's configuration, set once.
 *
 * @module mdfragment
 */

import { Marked } from "./vendor/marked.js";
import DOMPurify from "./vendor/purify.js";

const marked = new Marked({ gfm: true, breaks: false, async: false }, {
    renderer: {
        // Raw HTML in the model's text is text, not markup.
        html: (token) => ("block" in token && token.block ? `<p>${escapeHTML(token.text)}</p>\n` : escapeHTML(token.text)),
        // Headings sit under the page's own h1.
        heading({ tokens, depth }) {
            const level = Math.min(depth + 1, 6);
            return `<h${level}>${this.parser.parseInline(tokens)}</h${level}>\n`;
        },
        // An image would make the browser fetch a URL the model picked.
        image: ({ href, text }) => `<a href="${escapeHTML(href)}">${escapeHTML(text || href)}</a>`,
        // marked takes the text after an inline <code>, <pre>, <kbd> or
        // <script> tag for raw HTML, not to be escaped. Here such a tag is
        // text, and so is what follows it: a "<!--" after one made the rest
        // of its block a comment, which the sanitizer dropped. false: marked's
        // own renderer, which escapes it now.
        text(token) {
            if ("escaped" in token && token.escaped && !("tokens" in token && token.tokens)) token.escaped = false;
            return false;
        },
    },
});

/** The tags Markdown produces; anything else is dropped. */
const TAGS = [
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "table", "thead", "tbody", "tr", "th", "td", "h2", "h3", "h4", "h5", "h6",
];
const ATTRS = ["href", "title", "start", "align", "class"];

// An instance of our own, so its hooks touch no other DOMPurify user.
const purify = DOMPurify(window);
purify.addHook("uponSanitizeAttribute", (node, data) => {
    // class is kept only for a code block's language (marked's language-x).
    if (data.attrName === "class" && !(node.nodeName === "CODE" && /^language-[\w+#-]+$/.test(data.attrValue))) {
        data.keepAttr = false;
    }
});
purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
    }
});
// Set once: a config passed to each sanitize is parsed again each time.
purify.setConfig({
    ALLOWED_TAGS: TAGS,
    ALLOWED_ATTR: ATTRS,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
    // DOMPurify checks the value of an attribute it does not know to be
    // no URL against ALLOWED_URI_REGEXP: a list's start ("7") and a
    // column's alignment ("right") were dropped.
    ADD_URI_SAFE_ATTR: ["start", "align"],
    RETURN_DOM_FRAGMENT: true,
});


/**
 * text's top-level tokens, as marked reads them (its lexer); it throws on a
 * few texts.
 * @param {string} text
 */
export const lex = (text) => marked.lexer(text);

/**
 * text as sanitized DOM, code blocks with their Copy buttons.
 * @param {Document} doc
 * @param {string} text  Markdown.
 * @returns {DocumentFragment}
 */
export function toSafeFragment(doc, text) {
    try {
        return safeFragment(doc, /** @type {string} */ (marked.parse(text)));
    } catch (err) {
        console.warn("mdfragment.js: marked could not read a text; it is shown as plain text", err);
        return plainFragment(doc, text);
    }
}

/**
 * html, marked's, as sanitized DOM, code blocks with their Copy buttons.
 * @param {Document} doc
 * @param {string} html
 * @returns {DocumentFragment}
 */
function safeFragment(doc, html) {
    const frag = /** @type {DocumentFragment} */ (purify.sanitize(html));
    const out = doc.importNode(frag, true);
    out.querySelectorAll("pre").forEach((pre) => wrapCode(doc, /** @type {HTMLElement} */ (pre)));
    return out;
}

/**
 * tokens as sanitized DOM in one pass of the sanitizer, which parses a
 * document of its own each time (a replayed chat's finished replies, each
 * rendered whole once, spent most of their time there), then split into
 * each token's nodes: every block marked renders is one element and a
 * line break, or nothing (a blank line, a reference definition). null when
 * the nodes are not so, or marked fails on a token: the tokens are then
 * made one by one.
 * @param {Document} doc
 * @param {import("./vendor/marked.js").Token[]} tokens
 * @returns {ChildNode[][] | null}
 */
export function madeTogether(doc, tokens) {
    if (tokens.length < 2) return null;
    let html = "";
    const shown = [];
    try {
        for (const token of tokens) {
            const one = /** @type {string} */ (marked.parser([token]));
            shown.push(one !== "");
            html += one;
        }
    } catch {
        return null;
    }
    const nodes = [...safeFragment(doc, html).childNodes];
    if (nodes.length !== 2 * shown.filter(Boolean).length) return null;
    for (let i = 0; i < nodes.length; i += 2) {
        if (!(nodes[i] instanceof Element) || nodes[i + 1].nodeType !== Node.TEXT_NODE) return null;
    }
    let at = 0;
    return shown.map((one) => (one ? nodes.slice(at, (at += 2)) : []));
}

/**
 * One top-level token as sanitized DOM; as plain text if marked fails on it.
 * @param {Document} doc
 * @param {import("./vendor/marked.js").Token} token
 */
export function blockFragment(doc, token) {
    try {
        return safeFragment(doc, marked.parser([token]));
    } catch (err) {
        console.warn("mdfragment.js: marked could not render a block; it is shown as plain text", err);
        return plainFragment(doc, token.raw);
    }
}

/**
 * text as paragraphs of plain text, one for each run of lines between
 * blank ones.
 * @param {Document} doc
 * @param {string} text
 */
export function plainFragment(doc, text) {
    const out = doc.createDocumentFragment();
    for (const para of text.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
        if (!para.trim()) continue;
        const p = doc.createElement("p");
        p.textContent = para;
        out.append(p);
    }
    return out;
}

/**
 * Puts a code block in a frame with its language and a Copy button.
 * @param {Document} doc
 * @param {HTMLElement} pre
 */
function wrapCode(doc, pre) {
    const frame = doc.createElement("div");
    frame.className = "code-block";
    const bar = doc.createElement("div");
    bar.className = "code-bar";
    const lang = doc.createElement("span");
    lang.className = "code-lang";
    lang.textContent = /language-([\w+#-]+)/.exec(pre.querySelector("code")?.className ?? "")?.[1] ?? "";
    const button = doc.createElement("button");
    button.type = "button";
    button.className = "btn small copy";
    button.dataset.testid = "copy-code";
    button.textContent = "Copy";
    button.setAttribute("aria-label", lang.textContent ? `Copy ${lang.textContent} code` : "Copy code");
    button.addEventListener("click", async () => {
        const ok = await copyText(doc, pre.textContent ?? "");
        button.textContent = ok ? "Copied" : "Copy failed";
        // The label stays (tests and readers find the button by it); the
        // outcome is said (announce.js), from the document if the block
        // was rendered again while the clipboard answered.
        const from = button.isConnected ? button : doc;
        from.dispatchEvent(new CustomEvent("announce", { bubbles: true, detail: ok ? "Copied." : "Copy failed." }));
        setTimeout(() => { button.textContent = "Copy"; }, 1500);
    });
    bar.append(lang, button);
    pre.replaceWith(frame);
    frame.append(bar, pre);
}

/**
 * Copies text to the clipboard; the async API needs a secure context, the
 * old execCommand path covers plain-HTTP deployments.
 * @param {Document} doc
 * @param {string} text
 */
async function copyText(doc, text) {
    try {
        await navigator.clipboard.writeText(text);
        return true;
    } catch {
        const area = doc.createElement("textarea");
        area.value = text;
        area.setAttribute("readonly", "");
        area.style.position = "fixed";
        area.style.opacity = "0";
        doc.body.append(area);
        area.select();
        const ok = doc.execCommand("copy");
        area.remove();
        return ok;
    }
}

/** @param {string} s */
function escapeHTML(s) {
    return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
