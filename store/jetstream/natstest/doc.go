// Package natstest starts a NATS server with JetStream for tests, as the
// gateway's nodes share one on a cluster: on loopback, a port of its own,
// its files in the test's temporary directory, and messages as large as
// the journal's unless a test says otherwise.
//
// Concurrency: Server and Start are called from a test's goroutine; the
// server they start stops when the test ends.
package natstest
