// Package httpworker runs an engine worker over HTTP: New returns a Worker
// (an engine.Worker) that POSTs each trigger, as {session, trigger, proposed},
// to a URL and reads the answer as the decision. Sign and Verify are the two
// halves of the request signature, for workers written in Go.
//
// Every request is signed: X-Gateway-Timestamp is the unix time in seconds,
// X-Gateway-Signature is "v1=" and the hex HMAC-SHA256 of
// "<timestamp>.<body>" under the shared secret, and a verifier refuses a
// timestamp more than a window (DefaultWindow, 5 minutes) from its clock.
// X-Gateway-Deadline says when the gateway stops waiting: on tool.execute,
// the attempt's deadline, which also ends the request. docs/workers.md
// describes the protocol for workers in any language.
//
// A failed request never leaves a tool call hanging: on tool.execute, Decide
// answers a retryable tool.error (code tool_failed), so the call's retry
// policy decides what happens next; on any other trigger it returns an error
// wrapping engine.ErrWorker.
//
// Concurrency: a Worker is safe for concurrent use; the engine calls Decide
// from every session's goroutine and from one goroutine per tool attempt. It
// keeps connections alive and bounds the requests open at once
// (Options.MaxInFlight tool runs, and as many other requests apart); a Decide
// beyond that waits for a slot, as long as its context allows, and never
// sends a tool.execute whose slot came after its deadline. Close releases
// idle connections.
package httpworker
