package openai

import (
	"crypto/rand"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/clienttools/gateway/engine/model"
)

// accumulator builds a turn from Chat Completions chunks. Tool calls arrive
// as fragments keyed by index: the first carries the id and name, the rest
// pieces of the argument text, which is kept raw because whether it is valid
// JSON is the engine's question, not ours.
type accumulator struct {
	text    strings.Builder
	split   splitText       // a character a chunk cut in half
	refused bool            // the text is a refusal (delta.refusal)
	calls   map[int64]*call // the latest call at each index
	order   []*call         // in the order they started
	finish  string
	usage   model.Usage
}

type call struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(chunk sdk.ChatCompletionChunk, emit func(string)) {
	// With stream_options.include_usage the last chunk carries the usage and
	// no choices; other chunks send usage as null.
	if chunk.JSON.Usage.Valid() {
		a.usage = model.Usage{InputTokens: int(chunk.Usage.PromptTokens), OutputTokens: int(chunk.Usage.CompletionTokens)}
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		if c := a.split.piece(ch.Delta.JSON.Content.Raw(), ch.Delta.Content); c != "" {
			a.text.WriteString(c)
			emit(c)
		}
		// A refusal's words come in their own member: they are the
		// turn's answer, which the user reads and the transcript keeps.
		if c := ch.Delta.Refusal; c != "" {
			a.refused = true
			a.text.WriteString(c)
			emit(c)
		}
		for _, tc := range ch.Delta.ToolCalls {
			c := a.calls[tc.Index]
			// Some servers (older Ollama) send every whole call at index 0;
			// a new id at a busy index is a new call, not more of the old
			// one, and so is a name with no id once the busy call's
			// arguments are whole (other servers repeat the name in every
			// fragment of one call).
			if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) ||
				(tc.ID == "" && tc.Function.Name != "" && c.name != "" && (tc.Function.Name != c.name || json.Valid([]byte(c.args.String())))) {
				c = &call{}
				if a.calls == nil {
					a.calls = make(map[int64]*call)
				}
				a.calls[tc.Index] = c
				a.order = append(a.order, c)
			}
			if c.id == "" {
				c.id = tc.ID
			}
			if c.name == "" {
				c.name = tc.Function.Name
			}
			c.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// response is the finished turn. A turn cut by its token limit
// (finish_reason "length") or a filter ("content_filter") runs no call:
// the stream does not say which calls ended before the cut, and half a
// call must never run.
func (a *accumulator) response() model.Response {
	a.text.WriteString(a.split.rest())
	r := model.Response{Text: a.text.String(), Usage: a.usage}
	if a.finish == "length" || a.finish == "content_filter" {
		r.StopReason = stopReason(a.finish, false)
		return r
	}
	for _, c := range a.order {
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		id := c.id
		if id == "" {
			// Some local servers send no id; the engine and the next request
			// need one to pair the result with the call.
			id = "call_" + rand.Text()
		}
		r.ToolUses = append(r.ToolUses, model.ToolUse{ID: id, Name: c.name, Arguments: args})
	}
	r.StopReason = stopReason(a.finish, len(r.ToolUses) > 0)
	if a.refused && r.StopReason == model.StopEndTurn {
		r.StopReason = model.StopRefusal
	}
	return r
}

// partial is what a cut-off turn leaves: the text the user already saw, and
// no tool calls, since half a call must never run.
func (a *accumulator) partial() model.Response {
	a.text.WriteString(a.split.rest())
	return model.Response{Text: a.text.String(), StopReason: model.StopError, Usage: a.usage}
}

func stopReason(finish string, calls bool) string {
	switch {
	case finish == "length":
		return model.StopMaxTokens
	case finish == "tool_calls" || finish == "function_call" || calls:
		// Some servers say "stop" even when the turn ends in tool calls.
		return model.StopToolUse
	case finish == "content_filter":
		return model.StopContentFilter
	default:
		// stop: the model is done and waits for the user.
		return model.StopEndTurn
	}
}
