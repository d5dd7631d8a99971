// Package agui serves AG-UI (the Agent-User Interaction protocol, core
// 1.0): an HttpAgent POSTs a RunAgentInput and reads the run's events as
// server-sent events (RUN_STARTED, TEXT_MESSAGE_START/CONTENT/END,
// TOOL_CALL_START/ARGS/END, TOOL_CALL_RESULT, RUN_FINISHED or RUN_ERROR).
// The front-end tools the input declares are the client tools the run can
// execute; their results, tool messages in the next run's input, answer
// the pending calls. docs/integrations.md describes the mapping.
//
// Entry points: New builds a Handler from Options (Find, which the gateway
// supplies: the request's browser's session for a threadId); the Handler
// serves POST /ag-ui.
//
// Concurrency: a Handler keeps no state between requests and is safe for
// concurrent use. Each run attaches its own engine.Page, reads it on the
// request's goroutine and detaches it before returning; the request's
// context (the browser left, or the gateway shuts down) ends it early.
package agui
