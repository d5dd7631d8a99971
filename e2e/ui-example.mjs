// Runs the example suite of docs/ui.md ("Testing your own chat UI with the
// gateway") as the doc writes it, so the doc cannot rot: the blocks after
// the `<!-- e2e: ui-example-script -->`, `-config` and `-spec` markers
// become e2e/my-script.json, playwright.config.ts and a spec in a temporary
// folder of their own, with bin/ (the config's ./bin/gateway) and
// node_modules/ linked from here, and Playwright runs them there. `make
// user-suite` runs it (part of make test), after `make build`.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = new URL("..", import.meta.url);
const doc = readFileSync(new URL("docs/ui.md", root), "utf8");

/** The code block after the marker `<!-- e2e: name -->`. */
function block(name) {
    const found = new RegExp(`<!-- e2e: ${name} -->\\s*\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
    if (!found) {
        console.error(`docs/ui.md has no code block after <!-- e2e: ${name} -->`);
        process.exit(1);
    }
    return found[1] + "\n";
}

const dir = mkdtempSync(join(tmpdir(), "ui-example-"));
mkdirSync(join(dir, "e2e"));
writeFileSync(join(dir, "e2e/my-script.json"), block("ui-example-script"));
writeFileSync(join(dir, "playwright.config.ts"), block("ui-example-config"));
writeFileSync(join(dir, "e2e/example.spec.ts"), block("ui-example-spec"));
for (const linked of ["bin", "node_modules"]) symlinkSync(fileURLToPath(new URL(linked, root)), join(dir, linked));

const playwright = fileURLToPath(new URL("node_modules/.bin/playwright", root));
const run = spawnSync(playwright, ["test"], { cwd: dir, stdio: "inherit" });
if (run.status === 0) rmSync(dir, { recursive: true, force: true });
else console.error(`docs/ui.md's example suite failed; it is in ${dir}`);
process.exit(run.status ?? 1);
