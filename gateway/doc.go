// Package gateway serves the chat over HTTP: the page, the static SDK, a
// health check, the WebSocket endpoint /ws that connects a browser to its
// engine session, and the HTTP front ends other chat UIs speak (the AI
// SDK's UI message stream at /api/chat, AG-UI at /ag-ui; chats.go mounts
// gateway/aisdk and gateway/agui behind the same admission rules; they
// share gateway/sse and gateway/frontend). Browsers are told apart by an scs
// cookie session, and a browser may open, resume and answer only its own
// sessions.
//
// Entry points: New builds a Server from Options; Server.Handler is its
// http.Handler and Server.Shutdown closes every socket with 1001. Each
// connection is owned by a goroutine the /ws request starts (conn.serve),
// which keeps reading. What the page receives is written by the goroutine
// that stored it when no writer is at work (conn.writeNow, a write that
// does not block), else by one writer goroutine per connection, running
// only while there are frames, which drains a bounded queue, so a slow
// browser is closed (1008) rather than allowed to block its session. The writer writes what is ready
// as one batch: the socket is corked (corkConn) while it writes, so the
// batch leaves in one system call. Buffers for reading a frame and for a
// batch come from pools and go back once used: an idle connection holds
// none.
// Closing never cuts off a frame being written, so the close code reaches
// a page that is merely slow. DecodeFrame is the one parser of browser
// frames.
//
// docs/gateway.md describes the endpoints and policies; docs/protocol.md
// the frames.
package gateway
