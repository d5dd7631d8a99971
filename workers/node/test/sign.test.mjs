import { test } from "node:test";
import assert from "node:assert/strict";
import { sign, verify, SignatureError, DEFAULT_WINDOW_SECONDS } from "../index.mjs";

// The worked example of docs/workers.md; httpworker/sign_test.go checks the
// same vector, so the Go and Node sides agree on the recipe.
const secret = "example-secret";
const timestamp = 1767225600; // 2026-01-01T00:00:00Z
const body = '{"session":"s1","trigger":{"type":"session.start","session":"s1"},"proposed":{}}';
const signature = "v1=9a336c65c3c3d9eba930b502d475021236d65ae4d42a3ebe856c7bd43b2df551";
const now = timestamp * 1000;

test("sign matches the worked example", () => {
    assert.equal(sign(secret, timestamp, body), signature);
    assert.equal(sign(Buffer.from(secret), String(timestamp), Buffer.from(body)), signature);
});

test("verify", async (t) => {
    const cases = [
        { name: "valid", o: {} },
        { name: "valid at the edge of the window", o: { now: now + DEFAULT_WINDOW_SECONDS * 1000 } },
        { name: "one of several signatures", o: { signature: `v0=abc, v1=00ff,${signature}` } },
        { name: "no headers", o: { timestamp: undefined, signature: undefined }, code: "no_signature" },
        { name: "no signature", o: { signature: "" }, code: "no_signature" },
        { name: "timestamp not a number", o: { timestamp: "yesterday" }, code: "bad_timestamp" },
        { name: "older than the window", o: { now: now + (DEFAULT_WINDOW_SECONDS + 1) * 1000 }, code: "stale" },
        { name: "newer than the window", o: { now: now - (DEFAULT_WINDOW_SECONDS + 1) * 1000 }, code: "stale" },
        { name: "custom window", o: { now: now + 31_000, windowSeconds: 30 }, code: "stale" },
        { name: "wrong secret", o: { secret: "other" }, code: "bad_signature" },
        { name: "body changed", o: { body: body.replace("s1", "s2") }, code: "bad_signature" },
        { name: "timestamp changed", o: { timestamp: String(timestamp + 1) }, code: "bad_signature" },
        { name: "not hex", o: { signature: "v1=zz" }, code: "bad_signature" },
    ];
    for (const c of cases) {
        await t.test(c.name, () => {
            const args = { secret, timestamp: String(timestamp), signature, body, now, ...c.o };
            if (!c.code) {
                verify(args);
                return;
            }
            assert.throws(() => verify(args), (err) => {
                assert.ok(err instanceof SignatureError);
                assert.equal(err.code, c.code);
                assert.ok(!err.message.includes(secret), "the error must not contain the secret");
                return true;
            });
        });
    }
});
