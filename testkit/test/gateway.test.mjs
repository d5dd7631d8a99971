// startGateway against the built binary (make build; or GATEWAY_BIN): it
// starts, serves, stops, cleans up, and says why when it cannot start.
// Run by `make user-suite`: cd testkit && node --test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startGateway } from "../index.js";

const binary = process.env.GATEWAY_BIN ?? fileURLToPath(new URL("../../bin/gateway", import.meta.url));

test("a gateway on the durable store serves, stops on SIGTERM and removes its data directory", async () => {
    const g = await startGateway({ binary, store: "jetstream" });
    try {
        assert.match(g.url, /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.equal(g.wsURL, `${g.url.replace("http:", "ws:")}/ws`);
        assert.ok(g.dataDir && existsSync(g.dataDir), "the data directory exists while it runs");
        assert.equal((await fetch(`${g.url}/healthz`)).status, 200);
        assert.equal((await fetch(`${g.url}/static/gateway.js`)).status, 200);
    } finally {
        const exit = await g.stop();
        assert.deepEqual(exit, { code: 0, signal: null }, "a clean exit on SIGTERM");
    }
    assert.equal(existsSync(g.dataDir), false, "stop() removed the data directory");
    assert.deepEqual(await g.stop(), { code: 0, signal: null }, "stop() twice is harmless");
});

test("with a script, the scripted model plays every model, even where a provider's key is set", async () => {
    const g = await startGateway({
        binary,
        script: new URL("../../examples/user-suite/script.json", import.meta.url),
        env: { ANTHROPIC_API_KEY: "not-a-key" }, // alone, it would make the demo's model Claude
    });
    try {
        assert.equal(g.dataDir, null, "memory store: no data directory");
        const said = () => g.output.find((line) => line.includes("gateway model:"));
        for (let i = 0; i < 100 && !said(); i++) await new Promise((r) => setTimeout(r, 50));
        assert.match(said() ?? "(no model line)", /gateway model: scripted/);
    } finally {
        await g.stop();
    }
});

test("a binary that is not there: the error names it and says how to build it", async () => {
    await assert.rejects(startGateway({ binary: "/nonexistent/gateway" }), /cannot run \/nonexistent\/gateway: .*ENOENT.*make build/);
});

test("a binary this user may not run: the error says so, not how to build it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "testkit-"));
    const file = join(dir, "gateway");
    await writeFile(file, "not a program", { mode: 0o644 });
    try {
        await assert.rejects(startGateway({ binary: file }), /EACCES \(it is not an executable this user may run: chmod \+x it/);
    } finally {
        await rm(dir, { recursive: true, force: true });
    }
});

test("a gateway that exits at once: the error has its output", async () => {
    await assert.rejects(startGateway({ binary, args: ["--no-such-flag"] }), /exited \(code 1\) before listening:[\s\S]*no-such-flag/);
});

test("a script that does not load: the error has the gateway's reason", async () => {
    await assert.rejects(startGateway({ binary, script: "/nonexistent/script.json" }), /exited \(code 1\) before listening:[\s\S]*script/);
});
