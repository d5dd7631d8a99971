/**
 * gateway.js (test kit): starts the gateway binary as a child process for a
 * test suite, on a port the kernel picks, and stops it.
 *
 * The binary prints `gateway listening: open http://HOST:PORT/` once it
 * accepts connections; startGateway waits for that line, so the returned
 * gateway is ready. It always passes --offline, so every model id is the
 * scripted model (the demo script, or --script: docs/scripts.md) even where
 * a provider's key is set: a test never reaches a real model.
 *
 * Exports: startGateway(options).
 *
 * @module testkit/gateway
 */

import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const LISTENING = /gateway listening: open (http:\/\/\S+?)\/?$/m;

/**
 * Starts the gateway binary and resolves once it listens.
 * @param {import("./index.js").GatewayOptions} [options]
 * @returns {Promise<import("./index.js").RunningGateway>}
 */
export async function startGateway(options = {}) {
    const binary = pathOf(options.binary ?? process.env.GATEWAY_BIN ?? "bin/gateway");
    const store = options.store ?? "memory";
    const args = ["--listen", `${options.host ?? "127.0.0.1"}:0`, "--log-level", options.logLevel ?? "warn"];
    let dataDir = null;
    if (store === "memory") {
        args.push("--store", "memory");
    } else if (store === "jetstream") {
        dataDir = await mkdtemp(join(tmpdir(), "gateway-testkit-"));
        args.push("--store", "jetstream", "--data-dir", dataDir);
    } else {
        throw new Error(`startGateway: store ${JSON.stringify(store)}: want "memory" or "jetstream"`);
    }
    args.push("--offline");
    if (options.script) args.push("--script", pathOf(options.script));
    args.push(...(options.args ?? []));

    const child = spawn(binary, args, {
        cwd: options.cwd,
        env: { ...process.env, ...options.env },
        stdio: ["ignore", "pipe", "pipe"],
    });
    /** @type {string[]} */
    const output = [];
    let stdout = "";
    const exited = new Promise((done) => {
        child.once("exit", (code, signal) => done({ code, signal }));
        // A binary that could not start has no exit to wait for.
        child.once("error", () => child.pid === undefined && done({ code: null, signal: null }));
    });
    const listening = new Promise((ok, fail) => {
        child.once("error", (err) => fail(new Error(`startGateway: cannot run ${binary}: ${err.message} (${
            /** @type {any} */ (err).code === "EACCES" ? "it is not an executable this user may run: chmod +x it, or set binary / GATEWAY_BIN" : "build it: make build, or set binary / GATEWAY_BIN"})`)));
        exited.then(({ code, signal }) => fail(new Error(
            `startGateway: ${binary} exited (${signal ?? `code ${code}`}) before listening:\n${output.join("\n")}`)));
        child.stdout.setEncoding("utf8").on("data", (text) => {
            stdout += text;
            const m = LISTENING.exec(stdout);
            if (m) ok(m[1]);
        });
    });
    for (const [name, stream] of /** @type {const} */ ([["stdout", child.stdout], ["stderr", child.stderr]])) {
        stream.setEncoding("utf8").on("data", (text) => {
            for (const line of String(text).split("\n")) if (line) output.push(`${name}: ${line}`);
        });
    }
    listening.catch(() => {}); // awaited below; a late failure is not unhandled
    const timeout = options.timeout ?? 30_000;
    let timer;
    const tooSlow = new Promise((_, fail) => {
        timer = setTimeout(() => fail(new Error(`startGateway: ${binary} did not listen within ${timeout} ms:\n${output.join("\n")}`)), timeout);
    });

    let stopping = null;
    const stop = () => {
        stopping ??= (async () => {
            if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
                child.kill("SIGTERM");
                const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
                await exited;
                clearTimeout(killer);
            }
            if (dataDir) await rm(dataDir, { recursive: true, force: true });
            return exited;
        })();
        return stopping;
    };

    let url;
    try {
        url = await Promise.race([listening, tooSlow]);
    } catch (err) {
        await stop();
        throw err;
    } finally {
        clearTimeout(timer);
    }
    const ws = new URL("/ws", url);
    ws.protocol = "ws:";
    return { url, wsURL: ws.href, pid: child.pid ?? 0, dataDir, output, stop };
}

/** An absolute path from a path or a file: URL. @param {string | URL} p */
function pathOf(p) {
    return resolve(p instanceof URL || p.startsWith("file:") ? fileURLToPath(p) : p);
}
