// Package retry is the retry policy the HTTP model providers share: which
// failures are worth another attempt, how long to wait before it (the server's
// retry-after, else jittered exponential backoff), and Loop, which runs a turn
// again only while none of its text has reached the caller. It is internal
// because its knobs surface as each provider's Options, and the errors it
// makes carry the provider's name.
//
// Concurrency: its functions hold no state; Loop runs its attempts, waits
// and hooks (the request's OnRetry, the logger) on the caller's
// goroutine, one after another, and returns once the turn ends or its
// context does.
package retry
