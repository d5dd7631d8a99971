// Package store holds the durable backends of engine.Store: the JetStream
// store (store/jetstream, embedded or on a NATS cluster) and the contract
// tests every store passes (store/storetest). The in-memory store is
// engine.MemoryStore.
//
// It has no code of its own; each backend states its own concurrency
// contract.
package store
