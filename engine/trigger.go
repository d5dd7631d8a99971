package engine

import (
	"encoding/json"
	"fmt"
)

// Trigger types.
const (
	TypeSessionStart  = "session.start"
	TypeMessage       = "message"
	TypeModelFinished = "model.finished"
	TypeToolExecute   = "tool.execute"
	TypeToolFinished  = "tool.finished"
	TypeSessionEnd    = "session.end"
	TypeGuardTripped  = "guard.tripped"
)

// Trigger is something that happened to a session, handed to the worker's
// Decide. Its concrete type is one of the structs below.
type Trigger interface {
	TriggerType() string
}

// SessionStart: a session opens. The worker must answer with an agent.
type SessionStart struct {
	Session string `json:"session"`
}

// UserMessage: a user message arrived. Proposed: append it, then model.prompt.
type UserMessage struct {
	Message Message `json:"message"`
}

// ModelFinished: the model's turn ended. Proposed: append the assistant
// message, then one tool.call per tool use. Error is set when the provider
// failed; then nothing is proposed beyond appending what arrived.
type ModelFinished struct {
	Message    Message `json:"message"`
	StopReason string  `json:"stopReason,omitempty"`
	Usage      Usage   `json:"usage"`
	Error      string  `json:"error,omitempty"`
}

// ToolExecute: a worker-handled call (or attempt) starts; run it.
type ToolExecute struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the raw argument string.
	Arguments string `json:"arguments"`
	// Input is the engine's validation of Arguments.
	Input    ToolInput `json:"input"`
	Attempt  int       `json:"attempt"`
	Deadline string    `json:"deadline,omitempty"`
}

// Input statuses.
const (
	InputValid     = "valid"
	InputInvalid   = "invalid"
	InputMalformed = "malformed"
)

// ToolInput is the engine's classification of a call's raw arguments.
// Value is present for valid and invalid; Error for invalid and malformed.
type ToolInput struct {
	Status string          `json:"status"`
	Value  json.RawMessage `json:"value,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ToolFinished: a call settled, after its result or error and any retries.
type ToolFinished struct {
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Name   string `json:"name"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// SessionEnd: the session closes.
type SessionEnd struct {
	Reason string `json:"reason,omitempty"`
}

func (SessionStart) TriggerType() string  { return TypeSessionStart }
func (UserMessage) TriggerType() string   { return TypeMessage }
func (ModelFinished) TriggerType() string { return TypeModelFinished }
func (ToolExecute) TriggerType() string   { return TypeToolExecute }
func (ToolFinished) TriggerType() string  { return TypeToolFinished }
func (SessionEnd) TriggerType() string    { return TypeSessionEnd }
func (GuardTripped) TriggerType() string  { return TypeGuardTripped }

// The MarshalJSON methods put "type" first, as the wire format has it.

func (t SessionStart) MarshalJSON() ([]byte, error) {
	type plain SessionStart
	return EncodeFrame(TypeSessionStart, plain(t))
}

func (t UserMessage) MarshalJSON() ([]byte, error) {
	type plain UserMessage
	return EncodeFrame(TypeMessage, plain(t))
}

func (t ModelFinished) MarshalJSON() ([]byte, error) {
	type plain ModelFinished
	return EncodeFrame(TypeModelFinished, plain(t))
}

func (t ToolExecute) MarshalJSON() ([]byte, error) {
	type plain ToolExecute
	return EncodeFrame(TypeToolExecute, plain(t))
}

func (t ToolFinished) MarshalJSON() ([]byte, error) {
	// The pages' event's shape: result whenever ok, "" included, so a
	// worker reads an empty result, not a result left out.
	return EncodeFrame(TypeToolFinished, ToolFinishedEvent{ID: t.ID, OK: t.OK, Name: t.Name, Result: t.Result, Error: t.Error})
}

func (t SessionEnd) MarshalJSON() ([]byte, error) {
	type plain SessionEnd
	return EncodeFrame(TypeSessionEnd, plain(t))
}

func (t GuardTripped) MarshalJSON() ([]byte, error) {
	type plain GuardTripped
	return EncodeFrame(TypeGuardTripped, plain(t))
}

// DecodeTrigger reads a trigger from its JSON form.
func DecodeTrigger(data []byte) (Trigger, error) {
	typ, err := peekType(data)
	if err != nil {
		return nil, fmt.Errorf("failed to decode trigger: %w", err)
	}
	var t Trigger
	switch typ {
	case TypeSessionStart:
		t, err = decodeAs[SessionStart](data)
	case TypeMessage:
		t, err = decodeAs[UserMessage](data)
	case TypeModelFinished:
		t, err = decodeAs[ModelFinished](data)
	case TypeToolExecute:
		t, err = decodeAs[ToolExecute](data)
	case TypeToolFinished:
		t, err = decodeAs[ToolFinished](data)
	case TypeSessionEnd:
		t, err = decodeAs[SessionEnd](data)
	case TypeGuardTripped:
		t, err = decodeAs[GuardTripped](data)
	default:
		return nil, fmt.Errorf("failed to decode trigger: unknown type %q", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to decode %s trigger: %w", typ, err)
	}
	return t, nil
}
