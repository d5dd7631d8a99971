// Package anthropic runs Claude as a model.Model, on the official Anthropic Go
// SDK and the streaming Messages API. It maps the engine's transcript and tool
// declarations onto the API and streams the assistant's turn back, text as it
// arrives and tool arguments as the raw text the model wrote.
//
// Entry points: New builds a Model from Options; Model.Generate runs one turn.
// Rate limits (429), overload (529) and server errors (5xx) are retried with
// backoff that honours retry-after, a bounded number of times, and only while
// no text has reached the caller. Other failures come back as *model.Error;
// a stream cut off mid-turn returns the text so far, no tool uses, and a
// *model.Error with Truncated set.
//
// A Model holds one HTTP client and no per-turn state, so it is safe for
// concurrent use by many sessions; onDelta is called from the goroutine that
// called Generate.
package anthropic
