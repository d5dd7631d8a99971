// Package runners runs functions on pooled goroutines that keep the
// stacks they grew.
//
// A new goroutine's stack starts small and is copied, twice as large, each
// time the work outgrows it; work that runs deep (schema validation, JSON,
// a WebSocket write) on a fresh goroutine each time pays that copy again
// and again. A Pool hands each function to a goroutine that is free, or
// starts one; a goroutine free for longer than its idle time ends, so a
// quiet process holds none.
//
// Concurrency: Go and Close are safe for concurrent use. Close ends the
// free goroutines and waits for the busy ones to finish what they run;
// after it, Go runs each function on a goroutine of its own.
package runners
