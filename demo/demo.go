package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clienttools/gateway/engine"
)

// The seed's forecasts.
var forecasts = map[string]string{"San Francisco": "foggy", "Tokyo": "clear"}

// GetWeather is the seed's example tool, in Go.
var GetWeather = engine.Tool{
	Name:        "get_weather",
	Description: "Get the weather for a city.",
	Input: engine.Schema(`{
		"type": "object",
		"properties": {"city": {"type": "string"}},
		"required": ["city"]
	}`),
	Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
		var in struct{ City string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		city, sky, ok := forecast(in.City)
		if !ok {
			//lint:ignore ST1005 the model and the chat page show this text as is; it matches the seed's worker (examples/seed/server.mjs) and the e2e specs.
			return nil, fmt.Errorf("No forecast for %s.", in.City)
		}
		return fmt.Sprintf("It's %s in %s.", sky, city), nil
	},
}

// forecast finds a city's forecast whatever its case ("tokyo", "TOKYO"),
// and the city's name as the forecasts write it.
func forecast(city string) (name, sky string, ok bool) {
	for name, sky := range forecasts {
		if strings.EqualFold(name, strings.TrimSpace(city)) {
			return name, sky, true
		}
	}
	return "", "", false
}

// NextPage is a test tool for the gateway's guards: each page it reads
// points to another, so the demo script's "test loop" calls it again and
// again, as a model stuck in a loop does, until a guard stops the turn.
var NextPage = engine.Tool{
	Name:        "next_page",
	Description: "A test tool: read a page of results; each page points to the next.",
	Input: engine.Schema(`{
		"type": "object",
		"properties": {"cursor": {"type": "string", "pattern": "^c[0-9]+$"}},
		"required": ["cursor"]
	}`),
	Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
		var in struct{ Cursor string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(strings.TrimPrefix(in.Cursor, "c"))
		if err != nil {
			return nil, fmt.Errorf("cursor %q is not c and a number", in.Cursor)
		}
		return fmt.Sprintf("Nothing on this page; the next is c%d.", n+1), nil
	},
}

// DeleteFile is a test tool for the approval gate: it asks the user before
// each call, and deletes nothing (the demo has no files).
var DeleteFile = engine.Tool{
	Name:        "delete_file",
	Description: "A test tool: delete a file. The user approves each call first.",
	Input: engine.Schema(`{
		"type": "object",
		"properties": {"path": {"type": "string"}},
		"required": ["path"]
	}`),
	Approval: engine.ApprovalAlways,
	Retry:    &engine.RetryPolicy{Timeout: "5m"}, // a person answers
	Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
		var in struct{ Path string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return fmt.Sprintf("Deleted %s.", in.Path), nil
	},
}

// ClientTools are the tools the demo page runs in the browser: PageTools,
// then TestTools.
var ClientTools = append(slices.Clip(PageTools), TestTools...)

// PageTools are the demo page's own browser tools, which a worker's agent
// gains with --page-tools demo (WithPageTools).
var PageTools = []engine.AgentTool{
	{
		Name:        "get_local_time",
		Description: "Get the user's local time and time zone, from their browser.",
		Input:       engine.Schema(`{"type": "object", "properties": {}, "additionalProperties": false}`),
		Output: engine.Schema(`{
			"type": "object",
			"properties": {"time": {"type": "string"}, "timeZone": {"type": "string"}},
			"required": ["time", "timeZone"]
		}`),
		Handler: engine.HandlerClient,
	},
	{
		Name:        "set_theme",
		Description: "Switch the chat page between its dark and light theme.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": {"theme": {"enum": ["dark", "light"]}},
			"required": ["theme"]
		}`),
		Handler: engine.HandlerClient,
	},
	{
		Name:        "confirm",
		Description: "Ask the user a yes/no question; they click Approve or Deny.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": {"question": {"type": "string"}},
			"required": ["question"]
		}`),
		Output: engine.Schema(`{
			"type": "object",
			"properties": {"approved": {"type": "boolean"}},
			"required": ["approved"]
		}`),
		Handler: engine.HandlerClient,
		// A person answers: give them time.
		Retry: &engine.RetryPolicy{Timeout: "5m"},
	},
}

// TestTools are the demo page's tools that show what the gateway does
// with a tool that never answers, one that reports progress, and one that
// breaks its output schema: the demo agent's, never a worker's, whose
// model would be told of them at every turn.
var TestTools = []engine.AgentTool{
	{
		Name:        "never_answers",
		Description: "A test tool whose browser side never answers, to show timeouts and retries.",
		Handler:     engine.HandlerClient,
		Retry:       &engine.RetryPolicy{Attempts: 2, Timeout: "1s", Backoff: "200ms"},
	},
	{
		Name:        "slow_upload",
		Description: "A test tool: upload in parts, longer than its 1s timeout, reporting progress after each part.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": {"parts": {"type": "integer", "minimum": 1, "maximum": 20}}
		}`),
		Handler: engine.HandlerClient,
		// Progress keeps an attempt alive past its timeout, up to maxTimeout.
		Retry: &engine.RetryPolicy{Timeout: "1s", MaxTimeout: "15s"},
	},
	{
		Name:        "bad_output",
		Description: "A test tool whose browser side returns a result that violates its output schema.",
		Output:      engine.Schema(`{"type": "object"}`),
		Handler:     engine.HandlerClient,
	},
}

// WithPageTools wraps a worker so that every agent config it answers with
// also declares the demo page's own browser tools (PageTools) it does not
// declare itself: a worker written for another page, such as the seed's
// example, still gets a working "what time is it" on the demo page. A tool
// the worker declares under the same name is left as the worker wrote it.
func WithPageTools(w engine.Worker) engine.Worker {
	return engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		d, err := w.Decide(ctx, req)
		if err != nil || d.Agent == nil {
			return d, err
		}
		agent := *d.Agent
		agent.Tools = append([]engine.AgentTool(nil), agent.Tools...)
		for _, t := range PageTools {
			if !slices.ContainsFunc(agent.Tools, func(a engine.AgentTool) bool { return a.Name == t.Name }) {
				agent.Tools = append(agent.Tools, t)
			}
		}
		d.Agent = &agent
		return d, nil
	})
}

// ResearchWeather is the demo's sub-agent: a worker tool whose every call
// is delegated to a helper agent on model, which calls get_weather for each
// city; the helper's final message is the call's result
// (docs/subagents.md). The parent call's timeout bounds the helper's work.
func ResearchWeather(model string) engine.Tool {
	return engine.Tool{
		Name:        "research_weather",
		Description: "Ask a helper agent to research the weather in several cities; it answers with a summary.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": {"cities": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5}},
			"required": ["cities"]
		}`),
		Output: engine.Schema(`{"type": "string", "minLength": 1}`),
		Retry:  &engine.RetryPolicy{Timeout: "2m"},
		Agent: &engine.AgentConfig{
			Model:  model,
			Stream: true,
			System: "You are a helper agent. You get a JSON list of cities: call get_weather once for each, then report what each call returned, one sentence per city.",
			Tools:  []engine.AgentTool{GetWeather.Declare()},
		},
	}
}

// AskHelper is a test tool for sub-agents' browser tools: each call is
// delegated to a helper agent on model whose one tool is the page's
// get_local_time, so the page runs a sub-agent's client call.
func AskHelper(model string) engine.Tool {
	return engine.Tool{
		Name:        "ask_helper",
		Description: "A test tool: a helper agent answers the question, with the user's page's local time.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": {"question": {"type": "string"}},
			"required": ["question"]
		}`),
		Retry: &engine.RetryPolicy{Timeout: "1m"},
		Agent: &engine.AgentConfig{
			Model:  model,
			Stream: true,
			System: "You are a helper agent. Answer the question in the JSON you get, asking the user's page for its local time.",
			Tools:  []engine.AgentTool{clientTool("get_local_time")},
		},
	}
}

// clientTool is the demo page's browser tool named name.
func clientTool(name string) engine.AgentTool {
	i := slices.IndexFunc(ClientTools, func(t engine.AgentTool) bool { return t.Name == name })
	return ClientTools[i]
}

// Worker returns the demo agent on modelID ("scripted" offline).
func Worker(modelID string) *engine.ToolWorker {
	return &engine.ToolWorker{
		Agent: engine.AgentConfig{
			Model:  modelID,
			Stream: true,
			System: "You are the demo assistant of the client-tools gateway.",
			Tools:  ClientTools,
		},
		Tools: []engine.Tool{GetWeather, NextPage, DeleteFile, ResearchWeather(modelID), AskHelper(modelID)},
	}
}
