// Package jetstream keeps the gateway's sessions on NATS JetStream: an
// engine.Store (each session's journal on a stream, a subject per session;
// the summaries in a key-value bucket) and an scs.Store for the browsers'
// cookie identities, on the same backend. Open embeds a NATS server with no
// listening port and file storage in a data directory, or connects to an
// existing NATS server or cluster.
//
// Appends are fenced: each carries the stream sequence the store last saw
// for the session's subject (JetStream's expected-last-subject-sequence),
// so an append that does not follow the journal's last batch is refused,
// whoever wrote it.
//
// Concurrency: a Store is safe for concurrent use; the engine appends to
// one session from one goroutine at a time.
package jetstream
