// Package lazylog gives a logger its attributes only when it first writes.
//
// slog's Logger.With formats its attributes into a copy of the handler at
// once: a few hundred bytes for each session and each connection, kept for
// as long as they live, though most of them never write a record above the
// level. With keeps the attributes instead, and makes that copy when the
// first record gets through the handler's level (or when a caller adds
// attributes or a group to it). What is written is what Logger.With
// would have written, with two differences a caller should know: a
// slog.LogValuer among the attributes is resolved at that first write,
// not at With, so give it values that do not change; and the level is
// asked of the handler without the attributes, as slog's own handlers
// answer it (a handler that filters on attributes would not).
//
// Concurrency: a logger from With may be used from any goroutine, as any
// slog.Logger.
package lazylog
