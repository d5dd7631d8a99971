import { expect, test, Chat } from "./support";

test("the page is labelled and works from the keyboard", async ({ page }) => {
    const chat = await Chat.open(page);
    const log = page.getByRole("log", { name: "Conversation" });
    // Not live: the announcer speaks for it (screen-reader.spec.ts).
    await expect(log).toHaveAttribute("aria-live", "off");
    await expect(page.getByRole("status").filter({ hasText: "Connected" })).toBeVisible();
    // Idle: Send, and no Stop (Send becomes Stop while a turn runs).
    await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
    await expect(page.getByTestId("stop")).toBeHidden();
    await expect(page.getByTestId("stop")).toBeDisabled();

    // Shift+Enter adds a line; Enter sends.
    const prompt = page.getByLabel("Message", { exact: true });
    await prompt.focus();
    await page.keyboard.type("hello");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("there");
    await expect(prompt).toHaveValue("hello\nthere");
    await expect(chat.messages()).toHaveCount(0);
    await page.keyboard.press("Enter");
    await expect(chat.messages("user").getByTestId("message-text")).toHaveText(["hello\nthere"]);
    await expect(chat.reply("Hello! I'm the demo's scripted model.")).toBeVisible();
    await chat.idle();

    // Focus is visible on keyboard navigation.
    await prompt.focus();
    await page.keyboard.press("Tab");
    const send = page.getByRole("button", { name: "Send" });
    await expect(send).toBeFocused();
    expect(await send.evaluate((el) => getComputedStyle(el).outlineStyle)).toBe("solid");
});

test("static assets are versioned for caching", async ({ page }) => {
    await Chat.open(page);
    for (const el of [page.locator('link[rel="stylesheet"]'), page.locator('script[type="module"]')]) {
        const url = (await el.getAttribute("href")) ?? (await el.getAttribute("src"));
        expect(url).toMatch(/^\/static\/[a-z]+\.(css|js)\?v=[0-9a-f]+$/);
    }
});

test("New chat starts another session", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.send("hello");
    await expect(chat.reply("Hello!")).toBeVisible();
    const first = await chat.session();
    await page.getByRole("button", { name: "New chat" }).click();
    await expect(chat.messages()).toHaveCount(0);
    await expect.poll(() => chat.session()).not.toBe(first);
    await chat.connected();
    await chat.send("hello");
    await expect(chat.reply("Hello!")).toHaveCount(1);
    // A reload keeps the new conversation.
    const second = await chat.session();
    await page.reload();
    await chat.connected();
    expect(await chat.session()).toBe(second);
    await expect(chat.reply("Hello!")).toHaveCount(1);
});

test("New chat on a chat with nothing in it keeps it: clicks open no sessions", async ({ page }) => {
    const chat = await Chat.open(page);
    await chat.connected();
    const first = await chat.session();
    await chat.recordFrames();
    const newChat = page.getByRole("button", { name: "New chat" });
    for (let i = 0; i < 5; i++) await newChat.click();
    await expect(page.getByTestId("prompt")).toBeFocused();
    await expect(page.getByTestId("empty-chat")).toBeVisible();
    expect(await chat.session()).toBe(first);
    expect((await chat.sent()).filter((f: any) => f.type === "session.open")).toHaveLength(0);
    await chat.send("hello");
    await expect(chat.reply("Hello!")).toBeVisible();
    expect(await chat.session()).toBe(first);
});

test.describe("on a phone", () => {
    test.use({ viewport: { width: 360, height: 700 }, isMobile: true, hasTouch: true });

    test("nothing overflows sideways", async ({ page }) => {
        const chat = await Chat.open(page);
        await chat.send("what's the weather in San Francisco");
        await expect(chat.reply("get_weather returned: It's foggy in San Francisco.")).toBeVisible();
        const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth }));
        expect(scroll).toBeLessThanOrEqual(width);
        await expect(page.getByRole("button", { name: "Send" })).toBeInViewport();
    });

    test("after a reload the strip of chats shows the one open", async ({ page }) => {
        const chat = await Chat.open(page);
        const items = page.getByRole("navigation", { name: "Chats" }).getByTestId("history-item");
        for (const [i, text] of ["first chat here", "second chat here", "third chat here", "fourth chat here"].entries()) {
            if (i > 0) await page.getByRole("button", { name: "New chat" }).click();
            await chat.connected();
            await chat.send(text);
            await expect(items).toHaveCount(i + 1);
            await chat.idle();
        }
        // The oldest is last in the strip, beyond the screen's edge.
        await items.last().click();
        await expect(items.last()).toHaveAttribute("aria-current", "true");
        await page.reload();
        await chat.connected();
        await expect(items.and(page.locator("[aria-current]"))).toHaveText("first chat here");
        await expect(items.and(page.locator("[aria-current]"))).toBeInViewport({ ratio: 0.9 });
    });
});

test("a stored session the gateway does not know starts a new conversation", async ({ page }) => {
    await page.addInitScript(() => {
        if (!sessionStorage.getItem("gateway.session")) sessionStorage.setItem("gateway.session", JSON.stringify({ session: "no-such-session", seq: 3, events: [] }));
    });
    const chat = await Chat.open(page);
    expect(await chat.session()).not.toBe("no-such-session");
    await chat.send("hello");
    await expect(chat.reply("Hello!")).toBeVisible();
});
