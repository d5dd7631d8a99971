// Package engine runs agent sessions: the protocol types (triggers,
// actions, decisions), the decide loop, input and output schema checks, tool
// calls with their retries and timeouts, and the numbered event log a
// browser replays after a reconnect.
//
// Entry points: New builds an Engine from Options (a Worker that decides
// every step, a model.Resolver, optionally a ClientRouter for browser tools,
// a Store, a clock.Clock); Engine.Open starts a Session, asking the worker
// for its AgentConfig (session.start) and compiling the tools' schemas once.
// Session.Send, Answer, Cancel and End drive it; Session.Subscribe replays
// and follows its events. ToolWorker and Tool write an in-process worker as
// Go functions.
//
// Concurrency: every method of Engine and Session is safe for concurrent
// use. One goroutine owns each session's state and handles one message at a
// time; the worker's Decide is called from it, in order, for every trigger
// but tool.execute, which runs in its own goroutine per attempt with a
// context the engine cancels when the attempt ends. Model turns run in their
// own goroutine too. A ClientRouter's methods are called from the session
// goroutine and must not block.
package engine
