// Package aisdk serves the AI SDK's UI message stream (the `ai` package,
// major version 7): the protocol a `useChat` app speaks through its
// DefaultChatTransport. A POST carries the chat's messages and gets the
// session's events as UI message chunks over server-sent events; a GET of
// the chat's stream route resumes the current response from the session's
// own event log. docs/integrations.md describes the mapping.
//
// Entry points: New builds a Handler from Options (Find, which the gateway
// supplies: the request's browser's session for a chat id). Handler.Post
// serves POST /api/chat and Handler.Resume GET /api/chat/{id}/stream.
//
// Concurrency: a Handler keeps no state between requests and is safe for
// concurrent use. Each request attaches its own engine.Page for as long as
// its stream lasts, reads it on the request's goroutine and detaches it
// before returning; the request's context (the browser left, or the
// gateway shuts down) ends it early.
package aisdk
