// Package clock lets code that waits be tested without waiting. Real is the
// wall clock; Fake moves only when a test calls Advance, firing due timers in
// order, so timeout and backoff tests run in microseconds.
//
// Both are safe for concurrent use: a Fake's timers fire on the goroutine
// that calls Advance, one at a time, with its lock released.
package clock
