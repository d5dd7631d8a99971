/**
 * markdown.js renders the model's Markdown into the chat page, safely: GFM
 * (bold, lists, tables, links, fenced code) parsed by marked, then cleaned by
 * DOMPurify, both vendored under ./vendor/ (see `make vendor`). It is called
 * again as a reply streams, so a half-written reply renders as far as it
 * goes; each call renders again only the blocks (a paragraph, a list, a code
 * block…) that changed since the last call on the same element, and keeps
 * the others' nodes: a long reply costs no more to stream at its end than at
 * its start, and a reader's selection or a Copy button's "Copied" in a block
 * already written stays as the reply goes on.
 *
 * What the model writes is never live HTML: raw HTML in the Markdown is
 * shown as text, images become links (nothing loads from a URL the model
 * chose), and DOMPurify keeps only the tags Markdown makes. Links open in a
 * new tab with rel="noopener noreferrer". Each code block gets a Copy button,
 * whose outcome it says through a bubbling `announce` event (announce.js).
 *
 * Exports: renderMarkdown(target, text), toSafeFragment(doc, text).
 *
 * @module markdown
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
    RETURN_DOM_FRAGMENT: true,
});

/**
 * text as sanitized DOM, code blocks with their Copy buttons.
 * @param {Document} doc
 * @param {string} text  Markdown.
 * @returns {DocumentFragment}
 */
export function toSafeFragment(doc, text) {
    return safeFragment(doc, /** @type {string} */ (marked.parse(text)));
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
 * @typedef {{raw: string, nodes: ChildNode[]}} Block
 *   a top-level token's Markdown and the nodes it rendered to, in target
 * @typedef {{links: string, blocks: Block[]}} Shown
 *   what renderMarkdown last put in a target: its blocks, and the reference
 *   links (`[x]: url`) they were rendered with
 */

/** @type {WeakMap<HTMLElement, Shown>} */
const shownIn = new WeakMap();

/**
 * Replaces target's content with text rendered as Markdown. The blocks
 * that start text as they started the text of the last call on target are
 * kept as they are: marked renders each top-level token on its own, and a
 * token depends only on the text before it and on its own, so a block
 * whose Markdown is the same, after blocks that are all the same, renders
 * the same. A reference link's definition applies to every block, so a
 * change in them renders all again; so does a target whose children
 * something else changed.
 * @param {HTMLElement} target
 * @param {string} text
 */
export function renderMarkdown(target, text) {
    const doc = target.ownerDocument;
    const tokens = marked.lexer(text);
    const links = JSON.stringify(tokens.links);
    let before = shownIn.get(target);
    if (!before || before.links !== links || !holdsOnly(target, before.blocks)) {
        target.replaceChildren();
        before = { links, blocks: [] };
    }
    let same = 0;
    while (same < before.blocks.length && same < tokens.length && before.blocks[same].raw === tokens[same].raw) same++;
    for (const gone of before.blocks.slice(same)) for (const node of gone.nodes) node.remove();
    const blocks = before.blocks.slice(0, same);
    for (const token of tokens.slice(same)) {
        const frag = safeFragment(doc, marked.parser([token]));
        blocks.push({ raw: token.raw, nodes: [...frag.childNodes] });
        target.append(frag);
    }
    shownIn.set(target, { links, blocks });
}

/**
 * Whether target's children are the blocks' nodes, in their order.
 * @param {HTMLElement} target @param {Block[]} blocks
 */
function holdsOnly(target, blocks) {
    let child = target.firstChild;
    for (const block of blocks) {
        for (const node of block.nodes) {
            if (child !== node) return false;
            child = child.nextSibling;
        }
    }
    return child === null;
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
        // outcome is said (announce.js).
        button.dispatchEvent(new CustomEvent("announce", { bubbles: true, detail: ok ? "Copied." : "Copy failed." }));
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
