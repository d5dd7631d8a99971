// A user's own Playwright suite for a chat UI on the gateway, as
// docs/testing.md shows it: it uses only the published test kit
// (@clienttools/gateway-testkit), which starts the gateway binary with this
// suite's script. `make user-suite` runs it (part of make test).
import { defineConfig } from "@playwright/test";
import type { TestkitWorkerFixtures } from "@clienttools/gateway-testkit";
import { gatewayOptions } from "./options";

export default defineConfig<{}, TestkitWorkerFixtures>({
    testDir: ".",
    fullyParallel: true,
    workers: 2,
    forbidOnly: !!process.env.CI,
    timeout: 30_000,
    expect: { timeout: 10_000 },
    reporter: "list",
    outputDir: "../../test-results/user-suite",
    use: {
        gatewayOptions,
        browserName: "chromium",
        headless: true,
        launchOptions: {
            executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
            args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
        },
        trace: "retain-on-failure",
    },
});
