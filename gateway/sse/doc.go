// Package sse writes server-sent events: one `data: {json}` event per
// value, comments as keepalives, each write bounded by a deadline so a
// browser that stops reading loses its stream instead of holding the
// handler. The HTTP front ends (gateway/aisdk, gateway/agui) write their
// streams with it.
//
// Entry points: New starts a stream on an http.ResponseWriter (status 200,
// the event-stream headers); Writer.JSON, Writer.Data and Writer.Comment
// write. A Writer belongs to its handler's goroutine: it is not safe for
// concurrent use.
package sse
