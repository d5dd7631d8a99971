package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/clienttools/gateway/jsonfields"
)

// Action types.
const (
	TypeToolCall      = "tool.call"
	TypeToolResult    = "tool.result"
	TypeToolError     = "tool.error"
	TypeMessageAppend = "message.append"
	TypeModelPrompt   = "model.prompt"
	TypeHold          = "hold"
	TypeEndSession    = "session.end"
	TypeClientEvent   = "client.event"
)

// Action is one step of a Decision. Its concrete type is one of the structs
// below.
type Action interface {
	ActionType() string
}

// Decision is a worker's answer to a trigger.
type Decision struct {
	Agent   *AgentConfig `json:"agent,omitempty"`
	Actions []Action     `json:"actions,omitempty"`
}

// ToolCall dispatches a tool call.
type ToolCall struct {
	// ID is omitted to have the engine mint one.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is any JSON value. A JSON string is taken as the raw argument
	// string (that is how the model's calls are proposed); any other value is
	// the arguments themselves.
	Arguments json.RawMessage `json:"arguments"`
	Handler   Handler         `json:"handler,omitempty"`
	Retry     *RetryPolicy    `json:"retry,omitempty"`
}

// ToolResult settles a call with a result. ID and Attempt default to the
// answered tool.execute trigger.
type ToolResult struct {
	ID      string          `json:"id,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Result  json.RawMessage `json:"result"`
}

// ToolError settles a call with a failure, terminal unless Retryable.
type ToolError struct {
	ID        string          `json:"id,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Error     string          `json:"error"`
	Retryable bool            `json:"retryable,omitempty"`
	Code      ErrorCode       `json:"code,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}

// MessageAppend adds a message to the transcript.
type MessageAppend struct {
	Message Message `json:"message"`
}

// ModelPrompt starts a model turn on the transcript as it stands.
type ModelPrompt struct{}

// Hold does nothing: the session waits for the next trigger.
type Hold struct{}

// EndSession closes the session.
type EndSession struct {
	Reason string `json:"reason,omitempty"`
}

// ClientEvent pushes a free-form event to the session's browsers.
type ClientEvent struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

func (ToolCall) ActionType() string      { return TypeToolCall }
func (ToolResult) ActionType() string    { return TypeToolResult }
func (ToolError) ActionType() string     { return TypeToolError }
func (MessageAppend) ActionType() string { return TypeMessageAppend }
func (ModelPrompt) ActionType() string   { return TypeModelPrompt }
func (Hold) ActionType() string          { return TypeHold }
func (EndSession) ActionType() string    { return TypeEndSession }
func (ClientEvent) ActionType() string   { return TypeClientEvent }

func (a ToolCall) MarshalJSON() ([]byte, error) {
	type plain ToolCall
	if a.Arguments == nil {
		a.Arguments = json.RawMessage("{}")
	}
	return EncodeFrame(TypeToolCall, plain(a))
}

func (a ToolResult) MarshalJSON() ([]byte, error) {
	type plain ToolResult
	if a.Result == nil {
		a.Result = json.RawMessage("null")
	}
	return EncodeFrame(TypeToolResult, plain(a))
}

func (a ToolError) MarshalJSON() ([]byte, error) {
	type plain ToolError
	return EncodeFrame(TypeToolError, plain(a))
}

func (a MessageAppend) MarshalJSON() ([]byte, error) {
	type plain MessageAppend
	return EncodeFrame(TypeMessageAppend, plain(a))
}

func (a ModelPrompt) MarshalJSON() ([]byte, error) { return EncodeFrame(TypeModelPrompt, struct{}{}) }
func (a Hold) MarshalJSON() ([]byte, error)        { return EncodeFrame(TypeHold, struct{}{}) }

func (a EndSession) MarshalJSON() ([]byte, error) {
	type plain EndSession
	return EncodeFrame(TypeEndSession, plain(a))
}

func (a ClientEvent) MarshalJSON() ([]byte, error) {
	type plain ClientEvent
	return EncodeFrame(TypeClientEvent, plain(a))
}

// DecodeAction reads an action from its JSON form.
func DecodeAction(data []byte) (Action, error) {
	typ, err := peekType(data)
	if err != nil {
		return nil, fmt.Errorf("failed to decode action: %w", err)
	}
	var a Action
	switch typ {
	case TypeToolCall:
		var c ToolCall
		c, err = decodeAs[ToolCall](data)
		if err == nil && c.Name == "" {
			// Given empty, it is the engine's own proposal of a call the
			// model made without a name (it settles unknown_tool); a
			// worker's own is refused as it starts.
			var g givenMembers
			if g, err = readGiven(data); err == nil && g.Name == nil {
				err = errors.New(`missing "name"`)
			}
		}
		a = c
	case TypeToolResult:
		var r ToolResult
		r, err = decodeAs[ToolResult](data)
		if err == nil && r.Result == nil {
			err = errors.New(`missing "result"`)
		}
		if err == nil {
			err = checkAnswered(data)
		}
		a = r
	case TypeToolError:
		var e ToolError
		e, err = decodeAs[ToolError](data)
		if err == nil {
			err = checkAnswered(data)
		}
		a = e
	case TypeMessageAppend:
		a, err = decodeAs[MessageAppend](data)
	case TypeModelPrompt:
		a, err = decodeAs[ModelPrompt](data)
	case TypeHold:
		a, err = decodeAs[Hold](data)
	case TypeEndSession:
		a, err = decodeAs[EndSession](data)
	case TypeToolDelegate:
		var d ToolDelegate
		d, err = decodeAs[ToolDelegate](data)
		if err == nil && d.Agent.Model == "" {
			err = errors.New(`missing "agent.model"`)
		}
		if err == nil {
			err = checkAnswered(data)
		}
		a = d
	case TypeClientEvent:
		var e ClientEvent
		e, err = decodeAs[ClientEvent](data)
		if err == nil && e.Name == "" {
			err = errors.New(`missing "name"`)
		}
		a = e
	default:
		return nil, fmt.Errorf("failed to decode action: unknown type %q", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to decode %s action: %w", typ, err)
	}
	return a, nil
}

// givenMembers are the members an action may leave out, as data gives
// them: nil when left out, where the action's own fields cannot tell a
// member given empty (or 0) from one left out.
type givenMembers struct {
	Type    string  `json:"type"`
	Name    *string `json:"name"`
	ID      *string `json:"id"`
	Attempt *int    `json:"attempt"`
	Error   *string `json:"error"`
}

func readGiven(data []byte) (givenMembers, error) {
	var g givenMembers
	err := json.Unmarshal(data, &g)
	return g, err
}

// checkAnswered checks the members of a tool.result, tool.error or
// tool.delegate that an answer may leave out: an "id" or "attempt" given
// is the call's and the attempt's (a page's empty id or attempt 0 is
// bad_frame; a worker's was taken as left out, and settled the current
// attempt), and an error given empty is the tool's failure all the same
// (JavaScript's new Error().message): it says it failed without saying
// why. No error member at all is a mistake.
func checkAnswered(data []byte) error {
	g, err := readGiven(data)
	switch {
	case err != nil:
		return err
	case g.ID != nil && *g.ID == "":
		return errors.New(`"id" is empty: leave it out to answer the call asked`)
	case g.Attempt != nil && *g.Attempt < 1:
		return fmt.Errorf(`"attempt" is %d: attempts count from 1; leave it out to answer the attempt asked`, *g.Attempt)
	case g.Type == TypeToolError && g.Error == nil:
		return errors.New(`missing "error"`)
	}
	return nil
}

// UnmarshalJSON decodes a decision, its actions by their "type".
func (d *Decision) UnmarshalJSON(data []byte) error {
	var raw struct {
		Agent   json.RawMessage   `json:"agent"`
		Actions []json.RawMessage `json:"actions"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("failed to decode decision: %w", kindError(err))
	}
	d.Agent = nil
	if len(raw.Agent) > 0 && string(raw.Agent) != "null" {
		agent, err := decodeStrict[AgentConfig](raw.Agent)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		d.Agent = &agent
	}
	d.Actions = nil
	for i, r := range raw.Actions {
		a, err := DecodeAction(r)
		if err != nil {
			return fmt.Errorf("actions[%d]: %w", i, err)
		}
		d.Actions = append(d.Actions, a)
	}
	return nil
}

// EncodeFrame encodes v, an object, with "type": typ as its first member.
func EncodeFrame(typ string, v any) ([]byte, error) {
	var frame []byte
	err := withJSON(v, func(body []byte) {
		b := make([]byte, 0, len(body)+len(typ)+12)
		b = append(b, `{"type":`...)
		frame = appendMembers(AppendJSONString(b, typ), body)
	})
	return frame, err
}

// appendMembers closes b, the start of an object with members of its own
// written, with the members of body, an encoded object: its "{" dropped.
func appendMembers(b, body []byte) []byte {
	if len(body) > 2 {
		b = append(b, ',')
		return append(b, body[1:]...)
	}
	return append(b, '}')
}

// peekType reads the "type" member of a JSON object.
func peekType(data []byte) (string, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		if mistyped := (*json.UnmarshalTypeError)(nil); errors.As(err, &mistyped) && mistyped.Field != "" {
			return "", kindError(err) // an object, its "type" of the wrong kind
		}
		return "", fmt.Errorf("not a JSON object: %w", kindError(err))
	}
	if head.Type == nil || *head.Type == "" {
		return "", errors.New(`missing "type"`)
	}
	return *head.Type, nil
}

// decodeAs decodes an action's members (its "type" aside) into a T,
// refusing one T has no field for, at any depth (a misspelt "retriable"
// would otherwise make an error terminal without a word), and naming a
// member of the wrong kind by its path.
func decodeAs[T any](data []byte) (T, error) {
	return decodeStrict[T](data, "type")
}

// decodeStrict decodes data into a T, refusing members T has no field for
// at any depth, but allow at its top level.
func decodeStrict[T any](data []byte, allow ...string) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return v, kindError(err)
	}
	if path := jsonfields.Unknown(data, reflect.TypeFor[T](), allow...); path != "" {
		return v, fmt.Errorf("unknown member %q", path)
	}
	return v, nil
}

// kindError says a value of the wrong kind in the words of whoever wrote
// the JSON: a member by its path ("actions" is an object, want an array),
// else the value itself; encoding/json's text names Go's types.
func kindError(err error) error {
	var mistyped *json.UnmarshalTypeError
	switch {
	case !errors.As(err, &mistyped):
		return err
	case mistyped.Field != "":
		return fmt.Errorf("%q is %s, want %s", mistyped.Field, jsonfields.Article(mistyped.Value), jsonfields.Kind(mistyped.Type))
	default:
		return fmt.Errorf("%s, want %s", jsonfields.Article(mistyped.Value), jsonfields.Kind(mistyped.Type))
	}
}
