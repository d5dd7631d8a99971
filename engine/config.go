package engine

import (
	"encoding/json"

	"github.com/clienttools/gateway/engine/model"
)

// Handler says where a tool call runs.
type Handler string

// Handlers. The zero value means HandlerWorker.
const (
	HandlerWorker Handler = "worker"
	HandlerClient Handler = "client"
)

// orDefault returns h, or HandlerWorker when h is empty.
func (h Handler) orDefault() Handler {
	if h == "" {
		return HandlerWorker
	}
	return h
}

// AgentConfig is what a worker answers to session.start: the model to run and
// the tools it may call.
type AgentConfig struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream,omitempty"`
	System string `json:"system,omitempty"`
	// MaxTokens bounds one model turn; zero lets the provider choose.
	MaxTokens int         `json:"maxTokens,omitempty"`
	Tools     []AgentTool `json:"tools,omitempty"`
	// Limits bound the agent's model turns, repeated calls and tokens;
	// absent, or a field 0: the gateway's defaults (docs/agent.md).
	Limits *Limits `json:"limits,omitempty"`
}

// AgentTool declares a tool. The model sees Name, Description and Input; the
// rest is for the engine.
type AgentTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Input is the JSON Schema for the arguments; omitted: none.
	Input json.RawMessage `json:"input,omitempty"`
	// Output is the JSON Schema the result must satisfy; omitted: none.
	Output json.RawMessage `json:"output,omitempty"`
	// Handler is where it runs; default worker.
	Handler Handler `json:"handler,omitempty"`
	// Retry is the default policy copied into the proposed tool.call.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Idempotent says the tool may run twice with the same effect as once.
	// A worker attempt that was running when the gateway stopped is run
	// again only when this is true; otherwise it settles as interrupted.
	Idempotent *bool `json:"idempotent,omitempty"`
	// Approval "always" asks the user before each call runs
	// (tool.approval); empty: never.
	Approval string `json:"approval,omitempty"`
}

// Message is one transcript entry. It is defined by the model package so
// providers and the engine share it.
type Message = model.Message

// ToolUse is one tool call as the model produced it.
type ToolUse = model.ToolUse

// Usage counts a model turn's tokens.
type Usage = model.Usage
