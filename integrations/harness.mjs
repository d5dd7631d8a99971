// Starts the built gateway (bin/gateway) for the integration tests, on a
// free loopback port with the in-memory store and the tests' script, and
// gives each test a fetch that keeps the gateway's cookie, as a browser
// does: the cookie is the browser's identity, and its chats are its own.

import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const binary = join(root, "bin", "gateway");
const script = join(here, "test", "script.json");

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = createServer();
        srv.on("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

// startGateway runs bin/gateway with extra flags; stop() ends it (SIGTERM)
// and waits for it.
export async function startGateway(flags = []) {
    if (!existsSync(binary)) {
        throw new Error(`${binary} is missing: run make build first`);
    }
    const port = await freePort();
    const child = spawn(binary, ["--listen", `127.0.0.1:${port}`, "--store", "memory", "--offline", "--script", script, ...flags], {
        stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    child.stderr.on("data", (b) => { log += b; });
    const exited = new Promise((resolve) => child.on("exit", resolve));
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
        try {
            const res = await fetch(`${url}/healthz`);
            if (res.ok) break;
        } catch {
            // not listening yet
        }
        if (child.exitCode !== null || i > 200) {
            throw new Error(`the gateway did not start:\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 50));
    }
    return {
        url,
        log: () => log,
        async stop() {
            child.kill("SIGTERM");
            await exited;
        },
    };
}

// browser returns a fetch that sends and keeps the cookies the gateway
// sets, as one browser's.
export function browser() {
    const jar = new Map();
    return async (input, init = {}) => {
        const headers = new Headers(init.headers);
        if (jar.size > 0) {
            headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
        }
        const res = await fetch(input, { ...init, headers });
        for (const c of res.headers.getSetCookie()) {
            const [pair] = c.split(";");
            const i = pair.indexOf("=");
            jar.set(pair.slice(0, i), pair.slice(i + 1));
        }
        return res;
    };
}

// until polls cond until it is true, failing after a generous bound: the
// tests never assert a timing.
export async function until(cond, what) {
    for (let i = 0; i < 400; i++) {
        if (await cond()) return;
        await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`gave up waiting for ${what}`);
}
