// Package clienttools is the browser half of tool calls: it decides which
// connection of a session runs a client call, delivers it, and delivers it
// again when that connection drops and the session reconnects. The engine
// owns attempts, timeouts and settling; a Router only moves attempts to pages.
//
// Entry points: NewRouter, then Router.Attach / Router.Detach as connections
// come and go; the engine calls Dispatch and Release through
// engine.ClientRouter. A Router is safe for concurrent use: one mutex guards
// its tables, and it never blocks on a connection (Conn.Send must not block;
// it is called with that mutex held). Attempts waiting for a page are
// handed to it in dispatch order.
package clienttools
