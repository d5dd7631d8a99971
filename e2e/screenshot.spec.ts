// Writes docs/screenshot.png and docs/screenshot-dark.png: the demo page
// mid-conversation, beside an earlier chat, in its light and its dark theme.
// Skipped unless UPDATE_SCREENSHOT=1 (make screenshot), so ordinary runs
// leave docs/ alone.
import { fileURLToPath } from "node:url";
import { expect, test, Chat } from "./support";

const light = fileURLToPath(new URL("../docs/screenshot.png", import.meta.url));
const dark = fileURLToPath(new URL("../docs/screenshot-dark.png", import.meta.url));

test.use({ viewport: { width: 1080, height: 1000 }, timezoneId: "Europe/Paris", colorScheme: "light" });

test("docs/screenshot.png and docs/screenshot-dark.png", async ({ page }) => {
    test.skip(process.env.UPDATE_SCREENSHOT !== "1", "set UPDATE_SCREENSHOT=1 to rewrite docs/screenshot.png and docs/screenshot-dark.png");
    const chat = await Chat.open(page);
    // An earlier chat, for the list beside the conversation.
    await chat.send("what's the weather in San Francisco");
    await expect(chat.reply("get_weather returned: It's foggy in San Francisco.")).toBeVisible();
    await chat.idle();
    await page.getByTestId("new-chat").click();
    await chat.connected();

    await chat.send("what's the weather in Tokyo");
    await expect(chat.reply("get_weather returned: It's clear in Tokyo.")).toBeVisible();
    await chat.idle();
    await chat.send("what time is it");
    await expect(chat.reply("Your page says it's")).toBeVisible();
    await chat.idle();
    await chat.send("test slow tool");
    await expect(chat.reply("never_answers failed:")).toBeVisible();
    await chat.idle();
    await chat.send("delete my draft");
    await expect(chat.cards("confirm").getByTestId("confirm-approve")).toBeVisible();
    await page.getByTestId("prompt").fill("switch to dark theme");
    await expect(page.getByTestId("history-item")).toHaveText(["what's the weather in Tokyo", "what's the weather in San Francisco"]);
    await page.screenshot({ path: light });

    // The same conversation in the dark theme: the page follows the system's.
    await page.emulateMedia({ colorScheme: "dark" });
    await expect(page.locator("body")).toHaveCSS("background-color", "rgb(17, 20, 24)");
    await page.screenshot({ path: dark });
});
