// Package openai runs any server that speaks OpenAI's Chat Completions API as
// a model.Model: OpenAI itself, or a local llama.cpp, vLLM or Ollama server. It
// streams the turn with the official openai-go SDK's request types and SSE
// decoder, forwarding text as it arrives and assembling tool calls from their
// index-keyed fragments into the raw argument text the model wrote.
//
// Entry points: New builds a Model from Options (base URL, key); Model.Generate
// runs one turn, with the model id in Request.Model. Rate limits (429),
// overload and server errors (5xx) are retried with backoff that honours
// retry-after, a bounded number of times, and only while no text has reached
// the caller. Other failures come back as *model.Error; a stream cut off
// before data: [DONE] returns the text so far, no tool calls, and a
// *model.Error with Truncated set.
//
// A Model holds one HTTP client and no per-turn state, so it is safe for
// concurrent use by many sessions; onDelta is called from the goroutine that
// called Generate.
package openai
