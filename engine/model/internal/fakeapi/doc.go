// Package fakeapi is test support for the HTTP model providers: an httptest
// server that replays scripted replies (JSON errors or SSE frames) and records
// the requests it got, a sleeper that records retry waits, and small JSON
// helpers for building frames and checking request bodies. It is imported only
// by the providers' _test.go files and is never used by production code.
//
// Concurrency: the server answers each request on its own goroutine, as
// httptest does; its records (the requests, the sleeper's waits) are
// guarded by a mutex and safe to read while requests are served. The
// server stops with the test (t.Cleanup).
package fakeapi
