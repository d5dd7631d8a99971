// Package model defines what the engine needs from a language model: a
// transcript in, a streamed assistant turn out. Providers live in the
// sub-packages (scripted, anthropic, openai); each satisfies Model and is safe
// for concurrent use by many sessions.
package model
