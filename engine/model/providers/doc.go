// Package providers picks the model.Model that serves an agent config's model
// id, as a model.Resolver. It builds the Claude and OpenAI-compatible clients
// once, from a Config and the environment, and routes ids by prefix:
// "claude-" to Anthropic, "openai:<model>" and the configured prefixes to the
// OpenAI-compatible server, "scripted" to the injected scripted model.
//
// Entry points: New builds a Resolver; Resolver.Resolve maps an id to a Model;
// Resolver.Configured describes the routes for logs and errors. Keys are read
// here, from ANTHROPIC_API_KEY and OPENAI_API_KEY, and never logged.
//
// A Resolver is immutable after New, and the Models it returns are safe for
// concurrent use, so both may be shared by every session.
package providers
