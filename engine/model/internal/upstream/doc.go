// Package upstream bounds what the HTTP model providers read from an API, so
// that a broken, stuck or hostile server can neither hang a session's turn
// nor use up the process's memory: a stream that sends no event for too
// long is cut off (Watch, ErrStalled), an answer larger than its limit is
// cut off (ErrTooLarge), an error status's body is read only so far, and an
// answer that is not an event stream is refused (ErrNotEventStream). Guard
// is the providers' HTTP middleware that applies the bounds on bytes.
//
// Concurrency: a guarded body is read by one goroutine, as any response
// body. A watch's progress may be called from any goroutine; its timer, on
// the Limits' clock, ends its context from another.
package upstream
