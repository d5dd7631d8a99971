// Package gatewaytest runs a whole gateway in a Go test, and drives it from
// test browsers that speak the documented browser protocol
// (docs/protocol.md) over real WebSockets, with faults on demand.
//
// [Start] (or [New]) builds the gateway as cmd/gateway does: an engine with
// a worker and a model, a store, and the HTTP server with /ws, the chat
// page and /static/, listening on 127.0.0.1:0. By default the worker is the
// demo's agent (demo.Worker) and the model the scripted model running the
// demo script; [Options] takes your own script (docs/scripts.md), model or
// Go worker, and the memory store or JetStream in a temporary directory.
//
// A [Browser] is one browser identity: a cookie jar that has loaded the
// page. Its [Browser.Open] opens a [Page], one WebSocket with its session:
// send a message ([Page.Send]), wait for a tool call by name
// ([Page.ToolCall]), answer it ([Page.Answer]) or fail it ([Page.Fail]),
// with [Delay] or [Duplicate] as faults, drop the connection mid-call
// ([Page.Drop]) and resume with `after` ([Page.Reconnect]), and wait for
// what the gateway sent ([Page.Wait], [Page.Finished], [Page.Refusal],
// [Page.WaitIdle]). A Page does nothing by itself: a tool.call is answered
// only when the test says so.
//
// Concurrency: a Gateway, a Browser and a Page are safe for concurrent use.
// Each Page owns one goroutine, which reads its socket into the page's
// record of frames until the socket closes; [Page.Drop] and [Page.Close]
// close it, and the Gateway's Close (run by Start's cleanup) closes every
// page of its browsers before it stops the server, so no goroutine
// outlives the gateway. Every wait takes a context and ends with it.
package gatewaytest
