package engine

import "fmt"

// Calls that must not run twice: a tool that declares idempotent: false
// is never tried again blindly once an attempt of it may have run. Its
// attempt that reached the page (or the worker) and then timed out, or
// whose page left before answering, settles with outcome_unknown instead
// of a retry or a move to another page; one cut by a restart settles
// interrupted (rebuild.go). A tool that says nothing keeps the retry
// policy as it is; retries.md has the table.

// reached reports whether c's current attempt may have run: it reached its
// page, or it is a worker's (the request went out when it started).
func (c *call) reached() bool {
	return c.handler == HandlerWorker || !c.delivered.IsZero()
}

// settleUnknown settles c, which must not run twice, as outcome_unknown.
func (s *Session) settleUnknown(c *call, what string, abort CancelReason) {
	s.logger.Warn("tool call outcome unknown: it must not run twice", "call", c.id, "tool", c.name, "attempt", c.attempt)
	s.settle(c, outcome{code: CodeOutcomeUnknown, err: fmt.Sprintf("%s, and it is declared idempotent: false, so it was not tried again: %s", what, mayHaveRun)}, abort)
}

// mayHaveRun ends what the model reads of a call that must not run twice
// and may have run: outcome_unknown's, and Stop's while it ran.
const mayHaveRun = "it may or may not have taken effect. Check before calling it again."
