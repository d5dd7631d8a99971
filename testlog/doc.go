// Package testlog is a log's output that a test reads while loggers (or a
// child process's pipes) write to it from other goroutines: the buffer
// every package's tests share, where each kept a copy of its own.
//
// A Buffer is safe for concurrent use; its zero value is empty and ready.
package testlog
