// Package metrics defines the gateway's Prometheus metrics, in one place:
// the engine, the gateway and the binary record into a *Metrics, and
// /metrics serves its registry. Every label takes values from a bounded set
// (frame and event types, handlers, codes, declared tool names, configured
// model ids), never a session id or a user's text.
//
// A nil *Metrics records nothing, so code that records needs no check. Its
// methods are safe for concurrent use.
package metrics
