// Package natstest starts a NATS server with JetStream for tests, as the
// gateway's nodes share one on a cluster: on loopback, a port of its own,
// its files in the test's temporary directory, and messages as large as
// the journal's unless a test says otherwise. Cluster starts several,
// clustered, which a test may stop and start again one by one.
//
// Concurrency: Server, Start, Cluster and a Member's methods are called
// from a test's goroutine; the servers they start stop when the test ends.
package natstest
