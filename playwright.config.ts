import { defineConfig } from "@playwright/test";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The gateway under test is the built binary (make build), never `go run`:
// Playwright stops it with SIGTERM, and go run would leave the real server
// orphaned. GATEWAY_E2E_PORT moves it off the default port.
const port = Number(process.env.GATEWAY_E2E_PORT ?? 18731);
const baseURL = `http://127.0.0.1:${port}`;
// A second gateway runs a script of our own (e2e/script/script.json), for the
// specs in e2e/script/: how to test your own chat UI against the gateway.
const scriptURL = `http://127.0.0.1:${port + 1}`;
// A third gateway pings every second, so a page that stops answering loses
// its lease in about two seconds (e2e/lease.spec.ts).
const leaseURL = `http://127.0.0.1:${port + 2}`;

// Each gateway keeps its sessions in a data directory of its own, new for
// every run (the shell execs the gateway, so SIGTERM reaches it).
const dataDir = (url: string) => join(tmpdir(), `gateway-e2e-${new URL(url).port}`);

const gateway = (url: string, flags = "") => ({
    command: `rm -rf '${dataDir(url)}' && exec ./bin/gateway --listen ${new URL(url).host} --data-dir '${dataDir(url)}' --log-level warn ${flags}`.trim(),
    url: `${url}/healthz`,
    reuseExistingServer: process.env.E2E_REUSE_SERVER === "1",
    gracefulShutdown: { signal: "SIGTERM" as const, timeout: 5000 },
    stdout: "pipe" as const,
    stderr: "pipe" as const,
    timeout: 30_000,
});

export default defineConfig({
    testDir: "e2e",
    fullyParallel: true,
    workers: 2, // at most two: the CI machine has two cores
    forbidOnly: !!process.env.CI,
    retries: 0,
    timeout: 30_000,
    expect: { timeout: 10_000 },
    reporter: process.env.CI ? [["list"], ["html", { open: "never" }]] : "list",
    use: {
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
        // E2E_TRACE=1 keeps the DOM and the network of a failed test (npx
        // playwright show-trace), without its screencast: capturing frames
        // for every test loaded the two cores enough that a page got its
        // frames 600 ms late (progress.spec: 5 of 80 runs failed with it, 0
        // of 80 without). Off by default: recording every test for the few
        // that fail costs the suite a tenth of its time.
        trace: process.env.E2E_TRACE === "1" ? { mode: "retain-on-failure", screenshots: false } : "off",
        screenshot: "only-on-failure",
    },
    projects: [
        { name: "demo", testIgnore: ["script/**", "lease.spec.ts"], use: { baseURL } },
        { name: "script", testDir: "e2e/script", use: { baseURL: scriptURL } },
        { name: "lease", testMatch: "lease.spec.ts", use: { baseURL: leaseURL } },
    ],
    webServer: [
        gateway(baseURL),
        gateway(scriptURL, "--script e2e/script/script.json"),
        gateway(leaseURL, "--ping-interval 1s"),
    ],
});
