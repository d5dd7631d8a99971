import { defineConfig } from "@playwright/test";

// The gateway under test is the built binary (make build), never `go run`:
// Playwright stops it with SIGTERM, and go run would leave the real server
// orphaned. GATEWAY_E2E_PORT moves it off the default port.
const port = Number(process.env.GATEWAY_E2E_PORT ?? 18731);
const baseURL = `http://127.0.0.1:${port}`;

export default defineConfig({
    testDir: "e2e",
    fullyParallel: true,
    workers: 2, // two cores: one gateway, two browsers
    forbidOnly: !!process.env.CI,
    retries: 0,
    timeout: 30_000,
    expect: { timeout: 10_000 },
    reporter: process.env.CI ? [["list"], ["html", { open: "never" }]] : "list",
    use: {
        baseURL,
        browserName: "chromium",
        headless: true,
        // Debian's chromium: a browser download cannot work here.
        launchOptions: {
            executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
            args: [
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        },
        trace: "retain-on-failure",
        screenshot: "only-on-failure",
    },
    webServer: {
        command: `./bin/gateway --listen 127.0.0.1:${port}`,
        url: `${baseURL}/healthz`,
        reuseExistingServer: process.env.E2E_REUSE_SERVER === "1",
        gracefulShutdown: { signal: "SIGTERM", timeout: 5000 },
        stdout: "pipe",
        stderr: "pipe",
        timeout: 30_000,
    },
});
