package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/clienttools/gateway/engine/model"
)

// noResult answers a tool use the transcript never answered. The API rejects
// a tool_use without a tool_result in the next message, and one lost result
// must not make every later turn of the session fail.
const noResult = "No result was recorded for this tool call."

// params maps a model.Request onto the Messages API.
func (m *Model) params(req model.Request) sdk.MessageNewParams {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	p := sdk.MessageNewParams{
		Model:     req.Model,
		MaxTokens: int64(maxTokens),
		Messages:  messages(req.Messages),
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tp := sdk.ToolParam{Name: t.Name, InputSchema: inputSchema(t.InputSchema)}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return p
}

// inputSchema sends a declared schema as it is, with the "type": "object"
// the API insists on when it names none or a list (model.ObjectTypeWanted). No schema means no arguments.
func inputSchema(raw json.RawMessage) sdk.ToolInputSchemaParam {
	// The SDK's zero value is omitted altogether, so even the empty schema is
	// an override.
	b := []byte(`{"type":"object"}`)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err == nil && fields != nil {
		if model.ObjectTypeWanted(fields) {
			fields["type"] = json.RawMessage(`"object"`)
		}
		if full, err := json.Marshal(fields); err == nil {
			b = full
		}
	}
	return param.Override[sdk.ToolInputSchemaParam](json.RawMessage(b))
}

// turn is one message of the request. Tool results go before any other
// block of a user message, as the API requires.
type turn struct {
	role    string
	results []sdk.ContentBlockParamUnion
	blocks  []sdk.ContentBlockParamUnion
}

// transcript maps model messages onto API turns: consecutive messages of one
// role share a turn, tool messages become tool_result blocks of a user turn,
// and a tool result that answers no open tool use becomes user text, because
// the API would reject the whole request for it.
type transcript struct {
	turns []turn
	open  []string // tool uses of the last assistant turn still unanswered
}

func messages(msgs []model.Message) []sdk.MessageParam {
	var t transcript
	for _, msg := range msgs {
		switch msg.Role {
		case model.RoleTool:
			if t.answer(msg.ToolUseID) {
				t.result(toolResult(msg.ToolUseID, msg.Content, msg.IsError))
			} else {
				t.add(model.RoleUser, sdk.NewTextBlock(orphanText(msg)))
			}
		case model.RoleAssistant:
			t.closeOpen()
			t.assistant(msg)
		default:
			t.closeOpen()
			if strings.TrimSpace(msg.Content) != "" {
				t.add(model.RoleUser, sdk.NewTextBlock(msg.Content))
			}
		}
	}
	t.closeOpen()
	out := make([]sdk.MessageParam, 0, len(t.turns))
	for _, tn := range t.turns {
		blocks := append(tn.results, tn.blocks...)
		if tn.role == model.RoleAssistant {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		} else {
			out = append(out, sdk.NewUserMessage(blocks...))
		}
	}
	return out
}

func (t *transcript) assistant(msg model.Message) {
	var blocks, uses []sdk.ContentBlockParamUnion
	// The API rejects empty and whitespace-only text blocks.
	if strings.TrimSpace(msg.Content) != "" {
		blocks = append(blocks, sdk.NewTextBlock(msg.Content))
	}
	for _, tu := range msg.ToolUses {
		name, note := model.SentToolName(tu)
		if note != "" {
			blocks = append(blocks, sdk.NewTextBlock(note))
		}
		input, ok := objectInput(tu.Arguments)
		if !ok {
			// The API takes only an object as input. Send {} and keep what the
			// model wrote in the transcript, so it can see its own mistake.
			blocks = append(blocks, sdk.NewTextBlock(fmt.Sprintf(
				"[The arguments of tool call %s (%s) were not a JSON object, so {} was sent in their place. They were: %s]",
				tu.ID, name, tu.Arguments)))
		}
		uses = append(uses, sdk.NewToolUseBlock(tu.ID, input, name))
		t.open = append(t.open, tu.ID)
	}
	blocks = append(blocks, uses...)
	if len(blocks) > 0 {
		t.add(model.RoleAssistant, blocks...)
	}
}

// answer reports whether id is an open tool use, and closes it.
func (t *transcript) answer(id string) bool {
	for i, open := range t.open {
		if open == id {
			t.open = append(t.open[:i], t.open[i+1:]...)
			return true
		}
	}
	return false
}

// closeOpen answers every open tool use that got no result.
func (t *transcript) closeOpen() {
	for _, id := range t.open {
		t.result(toolResult(id, noResult, true))
	}
	t.open = nil
}

func (t *transcript) add(role string, blocks ...sdk.ContentBlockParamUnion) {
	tn := t.last(role)
	tn.blocks = append(tn.blocks, blocks...)
}

func (t *transcript) result(block sdk.ContentBlockParamUnion) {
	tn := t.last(model.RoleUser)
	tn.results = append(tn.results, block)
}

// last returns the last turn if it has role, else a new one.
func (t *transcript) last(role string) *turn {
	if n := len(t.turns); n > 0 && t.turns[n-1].role == role {
		return &t.turns[n-1]
	}
	t.turns = append(t.turns, turn{role: role})
	return &t.turns[len(t.turns)-1]
}

func toolResult(id, content string, isError bool) sdk.ContentBlockParamUnion {
	r := sdk.ToolResultBlockParam{ToolUseID: id}
	// An empty text block is rejected; a result with no content is not.
	if content != "" {
		r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: content}}}
	}
	if isError {
		r.IsError = sdk.Bool(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &r}
}

func orphanText(msg model.Message) string {
	what := "Result"
	if msg.IsError {
		what = "Error"
	}
	return fmt.Sprintf("[%s of tool %q for call %q, which matches no open tool call:]\n%s", what, msg.Name, msg.ToolUseID, msg.Content)
}

// objectInput returns args as a JSON object for a tool_use block; ok is
// false when args are something else and {} stands in for them. No arguments
// at all is the empty object, not a mistake.
func objectInput(args string) (input json.RawMessage, ok bool) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 {
		return json.RawMessage(`{}`), true
	}
	if trimmed[0] == '{' && json.Valid(trimmed) {
		return json.RawMessage(trimmed), true
	}
	return json.RawMessage(`{}`), false
}
