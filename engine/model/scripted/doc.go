// Package scripted is a deterministic model.Model that answers from a script
// of regexp rules (see docs/scripts.md): the gateway's offline default and the
// tool for end-to-end tests, built with New, Load, LoadFile or New(Demo()).
// A Model is immutable after construction and safe for concurrent use by many
// sessions, because every reply derives from the request's transcript alone.
package scripted
