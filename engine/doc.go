// Package engine runs agent sessions: the protocol types (triggers,
// actions, decisions, events and wire codes), the decide loop, input and
// output schema checks, tool calls with their retries and timeouts, which
// page runs each client call (the lease), and each page's stream: the
// numbered event log a browser replays after a reconnect, with the
// deliveries addressed to that page in their place among the events.
//
// Entry points: New builds an Engine from Options (a Worker that decides
// every step, a model.Resolver, a Store, a clock.Clock); Engine.Open starts
// a Session, asking the worker for its AgentConfig (session.start) and
// compiling the tools' schemas once. A worker may answer a tool.execute with
// ToolDelegate: a sub-agent (subagent.go) answers the call inside the
// session. Session.Attach adds a Page: its stream
// (Take, Ready, Done) and its side of the conversation (Send, Answer,
// Cancel, Detach). Session.Send, Answer, Cancel and End drive a session
// from Go, and OpenOptions.ID opens a session under an id the caller
// derives (an adapter's own chat key). ToolWorker and Tool write an in-process worker as Go functions.
//
// Concurrency: every method of Engine, Session and Page is safe for
// concurrent use. One goroutine owns each session's state (its calls, its
// pages and their leases) and handles one message at a time; it runs only
// while the session has messages (mailbox.go), so an idle session holds no
// goroutine. The worker's
// Decide is called from it, in order, for every trigger but tool.execute,
// which runs in its own goroutine per attempt with a context the engine
// cancels when the attempt ends. While a queued trigger's Decide takes
// slowDecision (250 ms; armed once Decide looks at its context), the
// session's goroutine lends its state to that timer's goroutine, which
// stores the step so far (Session.storeSoFar) while the session's waits.
// A sub-agent runs on its session's goroutine,
// as a second agent state; its model turns and attempts too are waited for
// by the session. Model turns run in their own goroutine too
// and publish their deltas under the event log's lock, the one lock that
// orders every page's stream. A model turn's and an attempt's goroutine
// starts once the step that started it is committed (goAfterCommit):
// stored, or refused by a failing store (the batch waits and is retried,
// and the session's memory says the work runs); a step the store fences
// starts nothing. A session with no page attached and no work leaves memory
// after Options.Unload, on the engine's clock (the journal keeps it; a page
// loads it again).
package engine
