/**
 * markdown.js renders the model's Markdown into the chat page as a reply
 * streams (mdfragment.js makes it safe DOM): it is called again as the
 * reply grows, so a half-written reply renders as far as it goes. Each call
 * renders again only what changed since the last call on the same element
 * (the top-level blocks from the first that changed: a paragraph, a table,
 * a code block; in a list, its items; in a table, its rows) and keeps the
 * others' nodes: the end of a long reply costs little more than its start
 * (marked still reads the whole text each time), and a reader's selection,
 * or a Copy button's "Copied", in what is already written stays as the
 * reply goes on.
 *
 * Exports: renderMarkdown(target, text), and toSafeFragment(doc, text)
 * from mdfragment.js. What it keeps of each element it rendered into is in
 * a WeakMap: it goes with the element.
 *
 * @module markdown
 */

import { blockFragment, lex, madeTogether, plainFragment } from "./mdfragment.js";

export { toSafeFragment } from "./mdfragment.js";

/**
 * @typedef {{end: number, nodes: ChildNode[], list?: ListShown, table?: TableShown}} Block
 *   a top-level token's end in the text it was rendered from (-1: its
 *   Markdown is not a slice of that text, so it is never kept), the nodes
 *   it rendered to, in target, and for a list, its items; for a table,
 *   its rows
 * @typedef {{kind: string, el: Element, head: ChildNode, items: Block[]}} ListShown
 *   a list's element (ol or ul) and what makes it (ordered, start,
 *   loose), the line break that opens it, and its items as blocks: their
 *   ends in the text, their nodes in el
 * @typedef {{el: Element, headEnd: number, body: Element | null, rows: Block[]}} TableShown
 *   a table's element, the end of its header and delimiter lines in the
 *   text, its tbody (null while it has no rows), and its rows as blocks:
 *   each row's line's end in the text, its nodes (tr and the line break
 *   after it) in body
 * @typedef {{text: string, links: string, blocks: Block[]}} Shown
 *   what renderMarkdown last put in a target: the text (as marked read it),
 *   its blocks, and the reference links (`[x]: url`) they were rendered with
 */

/** @type {WeakMap<HTMLElement, Shown>} */
const shownIn = new WeakMap();

/**
 * Replaces target's content with text rendered as Markdown. The blocks
 * that start text as they started the text of the last call on target are
 * kept as they are: marked renders each top-level token on its own, and a
 * token's Markdown is read with the text before it, so a block whose
 * Markdown is the same, after blocks that are all the same, renders the
 * same. Not quite: a paragraph is read with the line after it too (GFM's
 * table rule looks ahead), so the last block kept is never a paragraph
 * that another block follows; and what ended where the last text ended
 * is never kept (keptCount). A reference link's definition applies to
 * every block, so a change in them renders all again; so does a target
 * whose children something else changed. Only the offsets of the blocks
 * are kept, not their Markdown: marked's pieces of a text hold the whole
 * of that text, and a streamed reply's blocks, each kept from another
 * render, held as many copies of the reply.
 *
 * A text marked cannot read (it throws on a few) is shown as plain
 * paragraphs, so the reply is always there to read.
 * @param {HTMLElement} target
 * @param {string} text
 */
export function renderMarkdown(target, text) {
    const doc = target.ownerDocument;
    const src = text.replace(/\r\n?/g, "\n"); // as marked's lexer reads it
    let tokens;
    try {
        tokens = lex(src);
    } catch (err) {
        console.warn("markdown.js: marked could not read a reply; it is shown as plain text", err);
        shownIn.delete(target);
        target.replaceChildren(plainFragment(doc, text));
        return;
    }
    const links = JSON.stringify(tokens.links);
    let before = shownIn.get(target);
    if (!before || before.links !== links || !holdsOnly(target, before.blocks)) {
        target.replaceChildren();
        before = { text: "", links, blocks: [] };
    }
    // Token i's Markdown is the same as the block's when both are the
    // slice of their text between the same offsets, in the part the texts
    // share.
    const shared = sharedLength(before.text, src);
    let same = keptCount(before.blocks, tokens, 0, src, shared);
    if (same > 0 && same < tokens.length && tokens[same - 1].type === "paragraph") same--;
    const blocks = before.blocks.slice(0, same);
    let start = same > 0 ? blocks[same - 1].end : 0;
    // The first block that changed, a list or a table still being written,
    // keeps its items or rows that did not.
    const changed = same < tokens.length ? before.blocks[same] : undefined;
    const grown = changed?.list ? growList(doc, changed, tokens[same], start, src, shared)
        : changed?.table ? growTable(doc, changed, tokens[same], start, src, shared) : null;
    for (const gone of before.blocks.slice(grown ? same + 1 : same)) for (const node of gone.nodes) node.remove();
    if (grown) {
        blocks.push(grown);
        start = grown.end;
    }
    const rest = tokens.slice(blocks.length);
    const together = madeTogether(doc, rest);
    for (const [i, token] of rest.entries()) {
        const nodes = together ? together[i] : [...blockFragment(doc, token).childNodes];
        const el = nodes[0] instanceof Element ? nodes[0] : undefined;
        const end = start >= 0 && src.startsWith(token.raw, start) ? start + token.raw.length : -1;
        blocks.push({
            end, nodes,
            list: token.type === "list" ? listShown(el, token, start, src) : undefined,
            table: token.type === "table" ? tableShown(el, token, start, src) : undefined,
        });
        start = end;
        target.append(...nodes);
    }
    shownIn.set(target, { text: src, links, blocks });
}

/**
 * How many of blocks, from the first, show what tokens do: a token whose
 * Markdown is the slice of src between its block's offsets (from start),
 * in the part of src the last text shared, and not up to its end: what
 * ended there (the last text's end, or where the texts part) may read
 * otherwise with what follows it now, with its Markdown the same (a table's
 * last line of a tab is a row once a line break follows; a list item's
 * "--" is a heading's line with a tab after it).
 * @param {Block[]} blocks @param {{raw: string}[]} tokens @param {number} start
 * @param {string} src @param {number} shared
 */
function keptCount(blocks, tokens, start, src, shared) {
    let n = 0;
    for (let end = start; n < blocks.length && n < tokens.length; n++) {
        const raw = tokens[n].raw;
        if (blocks[n].end !== end + raw.length || end + raw.length >= shared || !src.startsWith(raw, end)) break;
        end += raw.length;
    }
    return n;
}

/** What makes a list's element: items of another kind make it anew. @param {any} token */
const listKind = (token) => `${token.ordered} ${token.start} ${token.loose}`;

/**
 * A list's items as blocks, from its rendered element (ol or ul): each
 * item's li and the line break after it. undefined when the element is not
 * so (the sanitizer took something out), or the list is not a slice of src
 * from start: its items are then never kept.
 * @param {Element | undefined} el @param {any} token @param {number} start @param {string} src
 * @returns {ListShown | undefined}
 */
function listShown(el, token, start, src) {
    const head = el?.firstChild;
    if (!el || !head || head.nodeType !== 3 || start < 0) return undefined;
    const items = itemsOf([...el.childNodes].slice(1), "LI", token.items, start, src);
    return items && { kind: listKind(token), el, head, items };
}

/**
 * The items' blocks in nodes, which are, for each item, its element (a
 * tag one: li, tr) and a line break; null if they are not.
 * @param {ChildNode[]} nodes @param {string} tag @param {{raw: string}[]} items
 * @param {number} start @param {string} src
 * @returns {Block[] | null}
 */
function itemsOf(nodes, tag, items, start, src) {
    if (nodes.length !== 2 * items.length) return null;
    return items.map((item, i) => {
        const el = nodes[2 * i], after = nodes[2 * i + 1];
        if (!(el instanceof Element) || el.tagName !== tag || after.nodeType !== 3) start = -1;
        start = start >= 0 && src.startsWith(item.raw, start) ? start + item.raw.length : -1;
        return { end: start, nodes: [el, after] };
    });
}

/**
 * old's list, updated to token's: the items that start src as they
 * started the last text are kept, the rest rendered anew into the same
 * element. null when it cannot be (another kind of list, an element
 * something else changed): the list is then made anew.
 * @param {Document} doc @param {Block} old @param {any} token
 * @param {number} start  the list's start in src
 * @param {string} src @param {number} shared  how much of src the last text shared
 * @returns {Block | null}
 */
function growList(doc, old, token, start, src, shared) {
    const list = /** @type {ListShown} */ (old.list);
    if (token.type !== "list" || list.kind !== listKind(token) || start < 0 || old.nodes[0] !== list.el ||
        !holdsOnly(list.el, [{ end: 0, nodes: [list.head] }, ...list.items])) {
        return null;
    }
    const same = keptCount(list.items, token.items, start, src, shared);
    const rest = token.items.slice(same);
    const frag = blockFragment(doc, { ...token, items: rest });
    const el = frag.firstElementChild;
    const from = same > 0 ? list.items[same - 1].end : start;
    const added = el && el.tagName === list.el.tagName ? itemsOf([...el.childNodes].slice(1), "LI", rest, from, src) : null;
    if (!added) return null;
    for (const gone of list.items.slice(same)) for (const node of gone.nodes) node.remove();
    list.el.append(...[...el.childNodes].slice(1));
    const end = src.startsWith(token.raw, start) ? start + token.raw.length : -1;
    return { end, nodes: old.nodes, list: { ...list, items: [...list.items.slice(0, same), ...added] } };
}

/**
 * A table token's lines: where its header and delimiter lines end in its
 * Markdown, and each row's line (with its line break), as marked's lexer
 * split them: its rows are the lines after the delimiter line, in order.
 * @param {any} token
 * @returns {{head: number, rows: {raw: string}[]}}
 */
function tableLines(token) {
    const raw = /** @type {string} */ (token.raw);
    const second = raw.indexOf("\n", raw.indexOf("\n") + 1);
    if (second < 0) return { head: raw.length, rows: [] }; // the delimiter line still being written
    const lines = raw.slice(second + 1).split(/(?<=\n)/);
    return { head: second + 1, rows: lines.slice(0, token.rows.length).map((line) => ({ raw: line })) };
}

/**
 * A table's rows as blocks, from its rendered element; undefined when it is
 * not a table, or the table is not a slice of src from start: its rows are
 * then never kept.
 * @param {Element | undefined} el @param {any} token @param {number} start @param {string} src
 * @returns {TableShown | undefined}
 */
function tableShown(el, token, start, src) {
    const lines = tableLines(token);
    if (!(el instanceof HTMLTableElement) || start < 0 || !src.startsWith(token.raw, start)) return undefined;
    const body = el.tBodies[0] ?? null, headEnd = start + lines.head;
    const rows = body ? itemsOf([...body.childNodes], "TR", lines.rows, headEnd, src) : lines.rows.length ? null : [];
    return rows ? { el, headEnd, body, rows } : undefined;
}

/**
 * old's table, updated to token's: while its header and delimiter lines
 * are the same, the rows whose lines start src as they started the last
 * text are kept, the rest rendered anew into the same tbody (a row
 * renders from its line, the header's count of cells and the alignment
 * alone). null when it cannot be (another header, an element something
 * else changed): the table is then made anew.
 * @param {Document} doc @param {Block} old @param {any} token
 * @param {number} start  the table's start in src
 * @param {string} src @param {number} shared  how much of src the last text shared
 * @returns {Block | null}
 */
function growTable(doc, old, token, start, src, shared) {
    const table = /** @type {TableShown} */ (old.table);
    const lines = token.type === "table" ? tableLines(token) : null;
    if (!lines || start < 0 || !src.startsWith(token.raw, start) || start + lines.head !== table.headEnd ||
        table.headEnd > shared || old.nodes[0] !== table.el || (table.el.tBodies[0] ?? null) !== table.body ||
        (table.body && !holdsOnly(table.body, table.rows))) {
        return null;
    }
    const same = keptCount(table.rows, lines.rows, table.headEnd, src, shared);
    const rest = token.rows.slice(same);
    /** @type {Block[]} */
    let added = [];
    let made = null;
    if (rest.length > 0) {
        const el = blockFragment(doc, { ...token, rows: rest }).firstElementChild;
        made = el instanceof HTMLTableElement ? el.tBodies[0] ?? null : null;
        const from = same > 0 ? table.rows[same - 1].end : table.headEnd;
        const rows = made && itemsOf([...made.childNodes], "TR", lines.rows.slice(same), from, src);
        if (!rows) return null;
        added = rows;
    }
    for (const gone of table.rows.slice(same)) for (const node of gone.nodes) node.remove();
    let body = table.body;
    if (made && body) body.append(...made.childNodes);
    else if (made) table.el.append(body = made);
    else if (same === 0 && body) {
        body.remove(); // a table of no rows has no tbody
        body = null;
    }
    return { end: start + token.raw.length, nodes: old.nodes, table: { ...table, body, rows: [...table.rows.slice(0, same), ...added] } };
}

/** How many characters a and b share at their start. @param {string} a @param {string} b */
function sharedLength(a, b) {
    if (b.startsWith(a)) return a.length; // a streamed reply, grown
    let n = 0;
    while (n < a.length && n < b.length && a.charCodeAt(n) === b.charCodeAt(n)) n++;
    return n;
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

