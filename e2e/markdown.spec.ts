// static/markdown.js as a streamed reply uses it: renderMarkdown called on
// the same element as the text grows renders again only the blocks that
// changed. What it shows must be, at every step, what the whole text
// renders to on a new element; and what was already written stays put.
import type { Page } from "@playwright/test";
import { expect, sdkTest as test } from "./support";

/** Texts whose blocks change meaning as more of them comes. */
const texts: Record<string, string> = {
    "paragraphs and headings": "# Title\n\nA first paragraph with **bold** and `code`.\nIts second line.\n\n## Part two\n\nMore text, _emphasis_ and ~~struck~~.\n",
    "a line that turns the paragraph above into a heading": "Looks like a paragraph\n===\n\nAnother one\n---\n\nthen a rule\n\n---\n\nend",
    "a list that grows, loosens and nests": "- one\n- two\n\n- three, loose now\n  - nested\n  - nested two\n\n1. ordered\n2. again\n\n7. starts at seven\n8. eight\n",
    "a table that grows rows": "| tool | handler |\n| --- | :-: |\n| get_weather | worker |\n| confirm | client |\n\nafter the table",
    // Rows of fewer and more cells than the header, an escaped pipe, a
    // line that starts a list and ends the table, a table right after it.
    // Rendered at "``" (a row, then a fence: the table has none) and at
    // "| - | -" (then "-:": the column's alignment changes).
    "a table's only row, and its alignment, changed": "| hh |\n| - |\n```\ncode\n```\n\n| a | bb |\n| - | -:|\n",
    // Rendered at "\t": a line of a tab after the rows is one once a line
    // break follows it, and the table's Markdown is the same either way.
    "a table whose last line becomes a row": "| hhh |\n| - |\n| r |\n\t\n\nNext paragraph.",
    // Rendered at "--": an item's Markdown the same, and read otherwise
    // once a tab follows (review41b).
    "a list item whose last line changes meaning": "1. bbbb\n--\t\n\nafter",
    "a long table, and rows that end it": "a | b | c\n--: | :-- | ---\n1 | `x` | **y**\n2\n3 | 4 | 5 | 6\n| a \\| b | [l](https://e.x) | ~~s~~ |\n|  | | |\n7 | 8 | 9\n- a list\n\n| h |\n| - |\n| r1 |\n| r2 |\n\t\n| r3 |\n",
    "a code block left open, then closed": "Code:\n\n```js\nconst a = 1;\n\nconsole.log(a);\n```\n\nand after it\n\n- in a list\n\n  ```\n  indented fence\n  ```\n",
    "a reference link used before its definition": "See [the docs][d] and [more][m].\n\nA middle paragraph.\n\n[d]: https://example.com/docs\n[m]: https://example.com/more \"More\"\n\nEnd.",
    "a quote that continues lazily": "> quoted\ncontinued lazily\n\n> another\n>\n> paragraph in it\n\nout",
    "raw HTML, which shows as text": "<div onclick=\"x()\">block html</div>\n\ninline <b>bold</b> and <img src=x onerror=y()>\n\n<script>alert(1)</script>\n",
    "line endings of Windows": "one\r\n\r\ntwo\r\n- a\r\n- b\r\n",
    // GFM's table rule reads the two lines after a paragraph: while the
    // third is "-", the indented second is code the paragraph takes in.
    "a paragraph read with the lines after it": "|\n\t-\n- x\n\nthen\n    indented\n-- y\n",
    "a text marked cannot read, on the way": "- a\n  > -\n  b\n\nand after it",
    "an inline tag as text, then a comment's start": "An inline <code> tag, then <!-- never closed\n\nThe next paragraph.\n",
};

test("a reply rendered as it streams shows at every step what its whole text renders to", async ({ page }) => {
    const differences = await page.evaluate(async (texts) => {
        const { renderMarkdown, toSafeFragment } = await import("/static/markdown.js");
        const found: string[] = [];
        for (const [name, text] of Object.entries(texts)) {
            const streamed = document.createElement("div");
            // Steps of 1 to 5 characters, so that every boundary of a block is met somewhere.
            for (let at = 0, step = 1; at < text.length; step = (step % 5) + 1) {
                at = Math.min(text.length, at + step);
                renderMarkdown(streamed, text.slice(0, at));
                const whole = document.createElement("div");
                renderMarkdown(whole, text.slice(0, at));
                if (streamed.innerHTML !== whole.innerHTML) {
                    found.push(`${name}, at ${at} of ${text.length}:\n${streamed.innerHTML}\n!==\n${whole.innerHTML}`);
                    break;
                }
                // A new element's blocks, cleaned in one pass and split,
                // are what the whole text's HTML cleaned at once is.
                const once = document.createElement("div");
                once.append(toSafeFragment(document, text.slice(0, at)));
                if (whole.innerHTML !== once.innerHTML) {
                    found.push(`${name}, at ${at} of ${text.length}, as the whole text:\n${whole.innerHTML}\n!==\n${once.innerHTML}`);
                    break;
                }
            }
        }
        return found;
    }, texts);
    expect(differences).toEqual([]);
});

test("what marked cannot read, or takes for HTML, still shows as the model's text", async ({ page }) => {
    const shown = await page.evaluate(async () => {
        const { renderMarkdown } = await import("/static/markdown.js");
        const el = document.createElement("div");
        document.body.append(el);
        const out: string[] = [];
        // marked throws on this one (a list item quoting an empty list
        // marker, then a lazy line): the page must not, and shows the text.
        renderMarkdown(el, "- a\n  > -\n  b\n\nThe end.");
        out.push(el.innerText.replace(/\s+/g, " ").trim());
        // After an inline <code> marked reads raw HTML: "<!--" hid the rest.
        renderMarkdown(el, "An inline <code> tag, then <!-- never closed\n\nThe next paragraph.");
        out.push(el.innerText.replace(/\s+/g, " ").trim());
        el.remove();
        return out;
    });
    expect(shown).toEqual([
        "- a > - b The end.",
        "An inline <code> tag, then <!-- never closed The next paragraph.",
    ]);
});

test("a text that is not the streamed one's continuation shows what a new element would", async ({ page }) => {
    const shown = await page.evaluate(async () => {
        const { renderMarkdown } = await import("/static/markdown.js");
        const el = document.createElement("div");
        const fresh = (text: string) => {
            const whole = document.createElement("div");
            renderMarkdown(whole, text);
            return whole.innerHTML;
        };
        const same: boolean[] = [];
        // A restarted turn's new text, then the transcript's, then an empty reply.
        // Then a text cut short, whose last paragraph reads otherwise with no list after it.
        for (const text of ["First try, **cut**\n\n- a\n- b", "Second try\n\n- c", "Second try\n\n- c\n- d\n\n[x]: https://example.com", "", "|\n\t|\n-", "|\n\t|\n"]) {
            renderMarkdown(el, text);
            same.push(el.innerHTML === fresh(text));
        }
        // Something else wrote into the element: the next render starts anew.
        renderMarkdown(el, "one\n\ntwo");
        el.append("stray");
        renderMarkdown(el, "one\n\ntwo\n\nthree");
        same.push(el.innerHTML === fresh("one\n\ntwo\n\nthree"));
        el.firstElementChild!.remove();
        renderMarkdown(el, "one\n\ntwo\n\nthree four");
        same.push(el.innerHTML === fresh("one\n\ntwo\n\nthree four"));
        // ... into a table still being written: it is made anew.
        renderMarkdown(el, "| a |\n| - |\n| 1 |\n| 2");
        el.querySelector("tbody tr")!.remove();
        renderMarkdown(el, "| a |\n| - |\n| 1 |\n| 2 |\n| 3 |");
        same.push(el.innerHTML === fresh("| a |\n| - |\n| 1 |\n| 2 |\n| 3 |"));
        return same;
    });
    expect(shown).toEqual([true, true, true, true, true, true, true, true, true]);
});

/**
 * Renders text on one element, selects the element at select, and streams
 * more onto it; then says what was selected, whether the selected element
 * and the first Copy button are the ones from before, and the texts at
 * items.
 */
async function streamOnto(page: Page, text: string, more: string[], select: string, items: string) {
    return page.evaluate(async ({ text, more, select, items }) => {
        const { renderMarkdown } = await import("/static/markdown.js");
        const el = document.createElement("div");
        document.body.append(el);
        renderMarkdown(el, text);
        const selected = el.querySelector(select)!;
        const copy = el.querySelector("button")!;
        const range = document.createRange();
        range.selectNodeContents(selected);
        getSelection()!.removeAllRanges();
        getSelection()!.addRange(range);
        for (const piece of more) {
            text += piece;
            renderMarkdown(el, text);
        }
        const result = {
            selected: getSelection()!.toString(),
            selectedKept: el.querySelector(select) === selected,
            copyKept: el.querySelector("button") === copy && copy.isConnected,
            items: [...el.querySelectorAll(items)].map((item) => item.textContent),
        };
        el.remove();
        return result;
    }, { text, more, select, items });
}

test("what a reply already wrote stays as it streams on: a selection in it, and its code block's Copy button", async ({ page }) => {
    const kept = await streamOnto(page, "The first paragraph, which the reader selects.\n\n```js\nconst a = 1;\n```\n\nThen",
        [" the reply", " goes on", "\n\n- with a list", "\n- of two"], "p", "li");
    expect(kept).toEqual({
        selected: "The first paragraph, which the reader selects.",
        selectedKept: true,
        copyKept: true,
        items: ["with a list", "of two"],
    });
});

test("a list being written keeps its items already written: a selection in one, and a code block's Copy button", async ({ page }) => {
    const kept = await streamOnto(page, "1. Install it:\n\n   ```bash\n   npm i x\n   ```\n\n2. Run",
        [" it", "\n\n3. Done", "\n\n4. And", " the last"], "li p", "ol > li > p:first-child");
    expect(kept).toEqual({ selected: "Install it:", selectedKept: true, copyKept: true, items: ["Install it:", "Run it", "Done", "And the last"] });
});

test("a table being written keeps its rows already written: a selection in one", async ({ page }) => {
    const kept = await streamOnto(page, "```sh\nmake check\n```\n\n| step | what it says |\n| ---: | --- |\n| 1 | all passed |\n| 2",
        [" | one", " failed |", "\n| 3 | **fixed** |", "\n\nAnd after the table."], "td:last-child", "td:first-child");
    expect(kept).toEqual({ selected: "all passed", selectedKept: true, copyKept: true, items: ["1", "2", "3"] });
});

test("a numbered list keeps its first number, and a table its columns' alignment", async ({ page }) => {
    const shown = await page.evaluate(async () => {
        const { renderMarkdown } = await import("/static/markdown.js");
        const styles = document.createElement("link"); // the chat page's, for a reply's cells
        styles.rel = "stylesheet";
        styles.href = "/static/app.css";
        await new Promise((loaded) => { styles.onload = loaded; document.head.append(styles); });
        const el = document.createElement("div");
        el.className = "message-text";
        document.body.append(el);
        renderMarkdown(el, "Then:\n\n7. seven\n8. eight\n\n| left | middle | right |\n| :-- | :-: | --: |\n| a | b | c |\n");
        const numbers = [...el.querySelectorAll("li")].map((li) => (li.parentElement as HTMLOListElement).start + [...li.parentElement!.children].indexOf(li));
        const align = [...el.querySelectorAll("th, td")].map((cell) => getComputedStyle(cell).textAlign.replace("-webkit-", ""));
        el.remove();
        styles.remove();
        return { numbers, align };
    });
    expect(shown).toEqual({ numbers: [7, 8], align: ["left", "center", "right", "left", "center", "right"] });
});
