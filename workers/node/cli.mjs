#!/usr/bin/env node
// Serve a module's decide function to the gateway:
//
//     WORKER_SECRET=... node workers/node/cli.mjs path/to/server.mjs --port 8787
//
// The module must export decide ({ trigger, proposed }) => decision. The
// secret is the one the gateway signs with. docs/workers.md has the details.

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { serve, serverURL } from "./index.mjs";

const usage = `usage: WORKER_SECRET=<secret> node cli.mjs <module.mjs> [--port 8787] [--host 127.0.0.1]

Serves the module's exported decide function to the gateway over HTTP.
  --port  port to listen on; 0 picks a free one (default 8787)
  --host  address to listen on (default 127.0.0.1, this machine only;
          0.0.0.0 accepts connections from other machines)
WORKER_SECRET is the secret the gateway signs its requests with.`;

function fail(message, code = 1) {
    console.error(`worker: ${message}`);
    process.exit(code);
}

let args;
try {
    args = parseArgs({
        allowPositionals: true,
        options: {
            port: { type: "string", short: "p", default: "8787" },
            host: { type: "string", default: "127.0.0.1" },
            help: { type: "boolean", short: "h" },
        },
    });
} catch (err) {
    fail(`${err.message}\n${usage}`, 2);
}
if (args.values.help) {
    console.log(usage);
    process.exit(0);
}
if (args.positionals.length !== 1) {
    fail(`want one module, got ${args.positionals.length}\n${usage}`, 2);
}
const file = args.positionals[0];
const port = Number(args.values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
    fail(`--port ${JSON.stringify(args.values.port)} is not a port number`, 2);
}
const secret = process.env.WORKER_SECRET;
if (!secret) {
    fail("WORKER_SECRET is not set: set it to the secret the gateway signs its requests with", 2);
}

let mod;
try {
    mod = await import(pathToFileURL(resolve(file)).href);
} catch (err) {
    fail(`failed to load ${file}: ${err.stack ?? err}`);
}
if (typeof mod.decide !== "function") {
    const names = Object.keys(mod);
    fail(`${file} does not export a decide function` +
        (names.length ? ` (it exports: ${names.join(", ")})` : " (it exports nothing)") +
        `; write "export function decide({ trigger, proposed }) { ... }"`);
}

let server;
try {
    server = await serve({ decide: mod.decide, secret, port, host: args.values.host });
} catch (err) {
    fail(`failed to listen on ${args.values.host}:${port}: ${err.message}`);
}
console.log(`worker: serving decide from ${file}, listening on ${serverURL(server)}`);

function shutdown(signal) {
    console.log(`worker: ${signal}, closing`);
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5_000).unref();
}
process.once("SIGINT", () => shutdown("SIGINT"));
process.once("SIGTERM", () => shutdown("SIGTERM"));
