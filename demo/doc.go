// Package demo is the agent that `go run ./cmd/gateway` serves offline: the
// seed's get_weather as a worker tool written in Go, and the demo page's
// browser tools. Worker returns a ready engine.Worker; it is stateless and
// safe for concurrent use.
package demo
