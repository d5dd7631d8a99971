import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, writeFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sign } from "../index.mjs";

const cli = fileURLToPath(new URL("../cli.mjs", import.meta.url));
const seed = fileURLToPath(new URL("../../../examples/seed/server.mjs", import.meta.url));

// run starts the CLI and resolves once it listens (with its URL) or exits.
function run(args, env) {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, WORKER_SECRET: "", ...env } });
    let out = "";
    let err = "";
    child.stderr.on("data", (d) => { err += d; });
    return new Promise((resolve) => {
        child.stdout.on("data", (d) => {
            out += d;
            const m = out.match(/listening on (http:\/\/\S+)/);
            if (m) resolve({ child, url: m[1] });
        });
        child.on("exit", (code) => resolve({ code, out, err }));
    });
}

test("serves the seed's example", async () => {
    const secret = "cli-test-secret";
    const { child, url, err } = await run([seed, "--port", "0"], { WORKER_SECRET: secret });
    assert.ok(url, `the CLI did not start: ${err}`);
    try {
        const body = JSON.stringify({
            session: "s1",
            trigger: { type: "tool.execute", id: "c1", name: "get_weather", arguments: '{"city":"Tokyo"}', input: { status: "valid", value: { city: "Tokyo" } }, attempt: 1 },
            proposed: {},
        });
        const ts = Math.floor(Date.now() / 1000);
        const res = await fetch(url, {
            method: "POST",
            headers: { "x-gateway-timestamp": String(ts), "x-gateway-signature": sign(secret, ts, body) },
            body,
        });
        assert.deepEqual(await res.json(), { actions: [{ type: "tool.result", result: "It's clear in Tokyo." }] });
    } finally {
        const exited = new Promise((resolve) => child.on("exit", resolve));
        child.kill("SIGTERM");
        assert.equal(await exited, 0);
    }
});

test("refuses to start without WORKER_SECRET", async () => {
    const { code, err } = await run([seed, "--port", "0"], {});
    assert.equal(code, 2);
    assert.match(err, /WORKER_SECRET is not set/);
});

test("says so when the module has no decide export", async () => {
    const dir = await mkdtemp(join(tmpdir(), "worker-cli-"));
    try {
        const file = join(dir, "server.mjs");
        await writeFile(file, "function decide() {}\nexport const tools = [];\n");
        const { code, err } = await run([file, "--port", "0"], { WORKER_SECRET: "s" });
        assert.equal(code, 1);
        assert.match(err, /does not export a decide function \(it exports: tools\); write "export function decide/);
    } finally {
        await rm(dir, { recursive: true });
    }
});

test("usage errors", async () => {
    const { code, err } = await run([], { WORKER_SECRET: "s" });
    assert.equal(code, 2);
    assert.match(err, /want one module, got 0\nusage:/);
});
