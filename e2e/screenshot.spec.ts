// Writes docs/screenshot.png: the demo page mid-conversation. Skipped unless
// UPDATE_SCREENSHOT=1 (make screenshot), so ordinary runs leave docs/ alone.
import { fileURLToPath } from "node:url";
import { expect, test, Chat } from "./support";

const out = fileURLToPath(new URL("../docs/screenshot.png", import.meta.url));

test.use({ viewport: { width: 900, height: 1000 }, timezoneId: "Europe/Paris", colorScheme: "light" });

test("docs/screenshot.png", async ({ page }) => {
    test.skip(process.env.UPDATE_SCREENSHOT !== "1", "set UPDATE_SCREENSHOT=1 to rewrite docs/screenshot.png");
    const chat = await Chat.open(page);
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
    await page.screenshot({ path: out });
});
