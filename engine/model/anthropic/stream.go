package anthropic

import (
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/clienttools/gateway/engine/model"
)

// accumulator builds a turn from the Messages API's stream events. It keeps
// the tool arguments as the raw text that streamed, because whether that
// text is valid JSON is the engine's question, not ours.
type accumulator struct {
	started bool // an event arrived: a failure from here on cut a turn off
	stopped bool // message_stop arrived: the turn is whole
	text    strings.Builder
	tools   map[int64]*toolBlock // by content block index
	order   []*toolBlock         // in the order the blocks started
	last    *toolBlock           // the last block started, when a tool use
	stop    sdk.StopReason
	usage   model.Usage
}

type toolBlock struct {
	id, name string
	input    string // the block's input at content_block_start, raw JSON
	args     strings.Builder
	whole    bool // its content_block_stop came
}

func (a *accumulator) add(ev sdk.MessageStreamEventUnion, emit func(string)) {
	a.started = true
	switch ev.Type {
	case "message_start":
		a.usage.InputTokens = int(ev.Message.Usage.InputTokens)
		a.usage.OutputTokens = int(ev.Message.Usage.OutputTokens)
	case "content_block_start":
		cb := ev.ContentBlock
		a.last = nil
		switch cb.Type {
		case "text":
			a.text.WriteString(cb.Text)
			emit(cb.Text)
		case "tool_use":
			if a.tools == nil {
				a.tools = make(map[int64]*toolBlock)
			}
			t := &toolBlock{id: cb.ID, name: cb.Name, input: cb.JSON.Input.Raw()}
			a.tools[ev.Index] = t
			a.order = append(a.order, t)
			a.last = t
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			a.text.WriteString(ev.Delta.Text)
			emit(ev.Delta.Text)
		case "input_json_delta":
			if t := a.tools[ev.Index]; t != nil {
				t.args.WriteString(ev.Delta.PartialJSON)
			}
		}
	case "content_block_stop":
		if t := a.tools[ev.Index]; t != nil {
			t.whole = true
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			a.stop = ev.Delta.StopReason
		}
		// message_delta's counts are running totals for the whole message.
		if ev.Usage.JSON.OutputTokens.Valid() {
			a.usage.OutputTokens = int(ev.Usage.OutputTokens)
		}
		if ev.Usage.JSON.InputTokens.Valid() && ev.Usage.InputTokens > 0 {
			a.usage.InputTokens = int(ev.Usage.InputTokens)
		}
	case "message_stop":
		a.stopped = true
	}
}

// response is the finished turn. A tool use whose block did not end is
// left out, and so is the last block when the turn was cut (its token
// limit, or a refusal, which stops generation at any token) and that
// block is a tool use: the API closes the block it cut like any other.
// Half a call must never run, and its input so far may be valid JSON ({}
// when none came).
func (a *accumulator) response() model.Response {
	r := model.Response{Text: a.text.String(), StopReason: stopReason(a.stop), Usage: a.usage}
	cut := r.StopReason == model.StopMaxTokens || r.StopReason == model.StopRefusal
	for _, t := range a.order {
		if t.whole && !(cut && t == a.last) {
			r.ToolUses = append(r.ToolUses, model.ToolUse{ID: t.id, Name: t.name, Arguments: t.arguments()})
		}
	}
	if len(r.ToolUses) > 0 && !cut {
		// Whatever the API called the end (a reason added since, end_turn),
		// the calls run and their results prompt the model again.
		r.StopReason = model.StopToolUse
	}
	return r
}

// partial is what a cut-off turn leaves: the text the user already saw, and
// no tool uses, since half a call must never run.
func (a *accumulator) partial() model.Response {
	return model.Response{Text: a.text.String(), StopReason: model.StopError, Usage: a.usage}
}

// arguments is the streamed argument text, or, for a tool use that streamed
// none (the API sends the whole input up front then), the block's input.
func (t *toolBlock) arguments() string {
	if t.args.Len() > 0 {
		return t.args.String()
	}
	if in := strings.TrimSpace(t.input); in != "" && in != "null" {
		return in
	}
	return "{}"
}

func stopReason(r sdk.StopReason) string {
	switch r {
	case sdk.StopReasonToolUse:
		return model.StopToolUse
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return model.StopMaxTokens
	case sdk.StopReasonRefusal:
		return model.StopRefusal
	default:
		// end_turn, stop_sequence, pause_turn (the gateway declares no
		// server tools, whose long turns pause): the model is done and
		// waits for the user.
		return model.StopEndTurn
	}
}
