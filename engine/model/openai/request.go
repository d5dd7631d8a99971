package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/clienttools/gateway/engine/model"
)

// noResult answers a tool call the transcript never answered. The API
// rejects an assistant message whose tool calls are not all followed by tool
// messages, and one lost result must not make every later turn fail.
const noResult = "Error: no result was recorded for this tool call."

// params maps a model.Request onto Chat Completions.
func (m *Model) params(req model.Request) sdk.ChatCompletionNewParams {
	p := sdk.ChatCompletionNewParams{
		Model:    req.Model,
		Messages: messages(req.System, req.Messages),
		// Usage comes only when asked for, in a last chunk of its own.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.MaxTokens > 0 {
		if m.maxCompletionTokens {
			p.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = sdk.Int(int64(req.MaxTokens))
		}
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: parameters(t.InputSchema)}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return p
}

// parameters sends a declared schema as it is, with "type": "object" when
// it names none or a list (model.ObjectTypeWanted). No schema means no arguments; the explicit empty object suits the
// servers that reject a function without parameters.
func parameters(raw json.RawMessage) shared.FunctionParameters {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	p := make(shared.FunctionParameters, len(fields)+1)
	for k, v := range fields {
		p[k] = v // RawMessage: numbers and key order inside stay verbatim
	}
	if model.ObjectTypeWanted(fields) {
		p["type"] = "object"
	}
	return p
}

// transcript maps model messages onto Chat Completions messages. Tool
// messages must directly follow the assistant message whose calls they
// answer, so a tool message that answers no open call is held back and sent
// as user text after the group, where it cannot break the request.
type transcript struct {
	out      []sdk.ChatCompletionMessageParamUnion
	open     []string // calls of the last assistant message still unanswered
	deferred []sdk.ChatCompletionMessageParamUnion
}

func messages(system string, msgs []model.Message) []sdk.ChatCompletionMessageParamUnion {
	var t transcript
	if system != "" {
		t.out = append(t.out, sdk.SystemMessage(system))
	}
	for _, msg := range msgs {
		switch msg.Role {
		case model.RoleTool:
			if t.answer(msg.ToolUseID) {
				t.out = append(t.out, sdk.ToolMessage(toolContent(msg.Content, msg.IsError), msg.ToolUseID))
			} else {
				t.deferred = append(t.deferred, sdk.UserMessage(orphanText(msg)))
			}
		case model.RoleAssistant:
			t.closeOpen()
			t.assistant(msg)
		default:
			t.closeOpen()
			if strings.TrimSpace(msg.Content) != "" {
				t.out = append(t.out, sdk.UserMessage(msg.Content))
			}
		}
	}
	t.closeOpen()
	return t.out
}

func (t *transcript) assistant(msg model.Message) {
	var a sdk.ChatCompletionAssistantMessageParam
	text := msg.Content
	for _, tu := range msg.ToolUses {
		name, note := model.SentToolName(tu)
		if note != "" {
			text += "\n" + note
		}
		args, ok := objectArguments(tu.Arguments)
		if !ok {
			// Servers that render the transcript through a chat template parse
			// the arguments, and fail the request on bad JSON. Send {} and
			// keep what the model wrote, so it can see its own mistake.
			text += fmt.Sprintf("\n[The arguments of tool call %s (%s) were not a JSON object, so {} was sent in their place. They were: %s]", tu.ID, name, tu.Arguments)
		}
		a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       tu.ID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: args},
			},
		})
		t.open = append(t.open, tu.ID)
	}
	if text = strings.TrimSpace(text); text != "" {
		a.Content.OfString = sdk.String(text)
	}
	if text == "" && len(a.ToolCalls) == 0 {
		return
	}
	t.out = append(t.out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
}

// answer reports whether id is an open tool call, and closes it.
func (t *transcript) answer(id string) bool {
	for i, open := range t.open {
		if open == id {
			t.open = append(t.open[:i], t.open[i+1:]...)
			return true
		}
	}
	return false
}

// closeOpen ends a group of tool messages: every open call gets an error
// result, then the held-back stray results follow as user messages.
func (t *transcript) closeOpen() {
	for _, id := range t.open {
		t.out = append(t.out, sdk.ToolMessage(noResult, id))
	}
	t.open = nil
	t.out = append(t.out, t.deferred...)
	t.deferred = nil
}

// toolContent marks a failure in the text, since a tool message has no
// is_error field.
func toolContent(content string, isError bool) string {
	if isError {
		return "Error: " + content
	}
	return content
}

func orphanText(msg model.Message) string {
	what := "Result"
	if msg.IsError {
		what = "Error"
	}
	return fmt.Sprintf("[%s of tool %q for call %q, which matches no open tool call:]\n%s", what, msg.Name, msg.ToolUseID, msg.Content)
}

// objectArguments returns args for a tool call in the transcript; ok is
// false when they are not a JSON object and {} stands in for them. No
// arguments at all is the empty object, not a mistake.
func objectArguments(args string) (string, bool) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 {
		return "{}", true
	}
	if trimmed[0] == '{' && json.Valid(trimmed) {
		return args, true
	}
	return "{}", false
}
