package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Roles of a transcript message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of a session's transcript. Assistant messages may carry
// the tool uses the model asked for; tool messages carry one call's outcome.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolUses are the calls an assistant message asked for, in order.
	ToolUses []ToolUse `json:"toolUses,omitempty"`
	// ToolUseID links a tool message to the call it answers.
	ToolUseID string `json:"toolUseId,omitempty"`
	// Name is the tool's name on a tool message.
	Name string `json:"name,omitempty"`
	// IsError marks a tool message that reports a failure.
	IsError bool `json:"isError,omitempty"`
	// ID is a user message's id from the page that sent it (the message
	// frame's id): the session takes a message of that id once, however
	// often the page sends it. Providers are not sent it.
	ID string `json:"id,omitempty"`
}

// ToolUse is one tool call as the model produced it. Arguments is the raw
// string the model streamed: it may not be JSON at all, and the engine, not the
// provider, decides what it is.
type ToolUse struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// WireName reports whether s may name a tool, or a tool call's id, in a
// request to Claude's and OpenAI's APIs: 1 to 64 letters, digits, _ and -.
// They check the names and ids of the transcript's tool calls too, so one
// the model wrote otherwise would fail every later turn.
func WireName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

// ObjectTypeWanted reports whether a tool's input schema, its members, goes
// to a provider with "type": "object" put in: it names no type, or a list
// (["object", "null"]; the engine refuses a list without "object"), where
// Claude's and OpenAI's APIs take "object" alone.
func ObjectTypeWanted(schema map[string]json.RawMessage) bool {
	t, ok := schema["type"]
	return !ok || bytes.HasPrefix(bytes.TrimSpace(t), []byte("["))
}

// WireID reports whether s may be a tool call's id in a request to
// Claude's and OpenAI's APIs: a WireName of at most 40 bytes, as OpenAI's
// takes no longer one ("string too long. Expected ... maximum length 40").
func WireID(s string) bool { return len(s) <= 40 && WireName(s) }

// InvalidToolName is the name a transcript's tool call goes to a provider
// under when the name the model wrote is not one the APIs take.
const InvalidToolName = "invalid_tool_name"

// SentToolName is the name tu goes to a provider under, in a transcript:
// its own, or InvalidToolName (the engine settled the call unknown_tool),
// with a note for the assistant's text that quotes what the model wrote, so
// it can see its own mistake.
func SentToolName(tu ToolUse) (name, note string) {
	if WireName(tu.Name) {
		return tu.Name, ""
	}
	if tu.Name == "" {
		return InvalidToolName, fmt.Sprintf("[Tool call %s named no tool, so it is sent as %s.]", tu.ID, InvalidToolName)
	}
	return InvalidToolName, fmt.Sprintf("[Tool call %s named the tool %.100q, which is not a name a tool can have, so it is sent as %s.]", tu.ID, tu.Name, InvalidToolName)
}

// Tool is what the model sees of a declared tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Request is one model turn's input.
type Request struct {
	Model     string
	System    string
	MaxTokens int
	// Messages is the session's transcript, shared, not copied: a provider
	// reads it and must not modify it.
	Messages []Message
	Tools    []Tool
	// Stream asks the provider to stream; providers that cannot stream call
	// OnDelta once with the whole text.
	Stream bool
	// OnRetry, when set, hears of each retry of the turn's request, before
	// its wait, on Generate's goroutine: the page can say why the turn is
	// quiet, and the metrics count it. A provider that does not retry
	// never calls it.
	OnRetry func(Retry)
}

// Retry is a failed attempt of a turn's request that is tried again.
type Retry struct {
	Provider string        // "anthropic", "openai": the metric's label
	Attempt  int           // the attempt that failed, from 1
	Attempts int           // how many the turn may make
	Wait     time.Duration // before the next one
	Err      error         // why it failed: an *Error, its message without secrets
}

// Usage counts the tokens of one turn, where the provider reports them.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// MaxTokenCount bounds each count of a Usage the engine takes: far above
// any turn's, and far below an int's end (a 32-bit one's too), so sums of
// a few never wrap.
const MaxTokenCount = 1 << 28

// Bounded is u with each count between 0 and MaxTokenCount: a server's
// report is not trusted to be sane, and a negative count would lower the
// token budgets' sums.
func (u Usage) Bounded() Usage {
	return Usage{InputTokens: min(max(u.InputTokens, 0), MaxTokenCount), OutputTokens: min(max(u.OutputTokens, 0), MaxTokenCount)}
}

// Stop reasons, normalised across providers.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopCancelled = "cancelled"
	StopError     = "error"
	// StopRefusal: the model declined (Claude's refusal, an OpenAI
	// refusal); its words, when it gave any, are the turn's text.
	StopRefusal = "refusal"
	// StopContentFilter: the server's filter ended the turn.
	StopContentFilter = "content_filter"
)

// Response is a finished assistant turn.
type Response struct {
	Text       string
	ToolUses   []ToolUse
	StopReason string
	Usage      Usage
}

// Model generates one assistant turn. It calls onDelta with each piece of text
// as it arrives, from the calling goroutine, and returns the whole turn. On an
// error the Response holds what arrived before it, so the caller can show it,
// but its tool uses must not be executed.
type Model interface {
	Generate(ctx context.Context, req Request, onDelta func(text string)) (Response, error)
}

// Func adapts a function to Model.
type Func func(ctx context.Context, req Request, onDelta func(text string)) (Response, error)

// Generate calls f.
func (f Func) Generate(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	return f(ctx, req, onDelta)
}

// ErrUnknownModel is returned by a Resolver for a model id no provider serves.
var ErrUnknownModel = errors.New("no provider for model")

// Resolver picks the Model that serves a model id from an agent config.
type Resolver interface {
	Resolve(modelID string) (Model, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(modelID string) (Model, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(id string) (Model, error) { return f(id) }

// ErrTooLong is what a provider's refusal of a prompt longer than the
// model's context window is (errors.Is on a *Error with TooLong): the
// chat's transcript outgrew what the model reads, and every later turn of
// it fails the same way.
var ErrTooLong = errors.New("the chat is longer than the model can read")

// Error is a provider failure the engine reports to the browser and the worker.
// Providers retry what is retryable themselves (429, overloaded, 5xx) before
// returning one.
type Error struct {
	Provider string // "anthropic", "openai", "scripted"
	Status   int    // HTTP status, 0 when the failure was not an HTTP answer
	Message  string // the provider's words, without secrets
	// Truncated is set when a stream was cut off mid-turn.
	Truncated bool
	// TooLong: the provider refused the prompt as longer than the model's
	// context window (ErrTooLong).
	TooLong bool
	// Err is what failed underneath, when something did (a timeout, a
	// reset connection), for errors.Is and errors.As; Message already
	// says it in words.
	Err error
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrTooLong and e is such a refusal.
func (e *Error) Is(target error) bool { return e.TooLong && target == ErrTooLong }

func (e *Error) Error() string {
	switch {
	case e.TooLong:
		// Said so the user knows what to do, first: the same chat fails
		// again, and a page may cut the provider's words.
		status := ""
		if e.Status != 0 {
			status = httpStatusText(e.Status) + ": "
		}
		return e.Provider + ": " + status + ErrTooLong.Error() + ": start a new chat (" + e.Message + ")"
	case e.Truncated:
		return e.Provider + ": stream cut off mid-turn: " + e.Message
	case e.Status != 0:
		return e.Provider + ": " + httpStatusText(e.Status) + ": " + e.Message
	default:
		return e.Provider + ": " + e.Message
	}
}

func httpStatusText(code int) string { return "status " + strconv.Itoa(code) }
