// Package storetest is the contract every engine.Store keeps, as tests:
// Run them against a store with a function that opens an empty one. The
// engine runs them against engine.MemoryStore, store/jetstream against the
// JetStream store, so both behave alike.
//
// Concurrency: Run calls open once per subtest, from the test's goroutine;
// the stores it gets are used from several goroutines where the contract
// says they may be.
package storetest
