package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// The seed's get_weather example as a Go worker: the tool is a Go function,
// ToolWorker answers session.start with the agent, runs the tool on
// tool.execute (a returned error becomes the tool.error the model reads),
// and returns proposed for everything else.
func ExampleToolWorker() {
	forecasts := map[string]string{"San Francisco": "foggy", "Tokyo": "clear"}

	tools := []engine.Tool{{
		Name:        "get_weather",
		Description: "Get the weather for a city.",
		Input: engine.Schema(`{
			"type": "object",
			"properties": { "city": { "type": "string" } },
			"required": ["city"]
		}`),
		Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ City string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			sky, ok := forecasts[in.City]
			if !ok {
				return nil, fmt.Errorf("No forecast for %s.", in.City)
			}
			return fmt.Sprintf("It's %s in %s.", sky, in.City), nil
		},
	}}

	worker := &engine.ToolWorker{
		Agent: engine.AgentConfig{Model: "claude-haiku-4-5-20251001", Stream: true},
		Tools: tools,
	}

	runExample(worker, "What's the weather in Tokyo and Paris?")
	// Output:
	// user: What's the weather in Tokyo and Paris?
	// assistant: [get_weather {"city":"Tokyo"}] [get_weather {"city":"Paris"}]
	// tool get_weather: It's clear in Tokyo.
	// tool get_weather (error): No forecast for Paris.
	// assistant: It's clear in Tokyo. No forecast for Paris.
}

// The seed's decide function, almost line for line: answer session.start
// with the agent, run the tool on tool.execute or report why it failed, and
// return proposed for everything else.
func ExampleWorkerFunc() {
	forecasts := map[string]string{"San Francisco": "foggy", "Tokyo": "clear"}

	type tool struct {
		engine.AgentTool
		exec func(input json.RawMessage) (string, error)
	}
	tools := []tool{{
		AgentTool: engine.AgentTool{
			Name:        "get_weather",
			Description: "Get the weather for a city.",
			Input:       engine.Schema(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		},
		exec: func(input json.RawMessage) (string, error) {
			var in struct{ City string }
			_ = json.Unmarshal(input, &in)
			sky, ok := forecasts[in.City]
			if !ok {
				return "", fmt.Errorf("No forecast for %s.", in.City)
			}
			return fmt.Sprintf("It's %s in %s.", sky, in.City), nil
		},
	}}

	decide := func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch trigger := req.Trigger.(type) {
		case engine.SessionStart:
			agent := engine.AgentConfig{Model: "claude-haiku-4-5-20251001", Stream: true}
			for _, t := range tools {
				agent.Tools = append(agent.Tools, t.AgentTool)
			}
			return engine.Decision{Agent: &agent}, nil

		// The model called a tool. Run it, or report why it failed.
		case engine.ToolExecute:
			i := slices.IndexFunc(tools, func(t tool) bool { return t.Name == trigger.Name })
			if i < 0 {
				return req.Proposed, nil // the ready-made unknown_tool error
			}
			result, err := tools[i].exec(trigger.Input.Value)
			if err != nil {
				return engine.Decision{Actions: []engine.Action{engine.ToolError{Error: err.Error()}}}, nil
			}
			text, _ := json.Marshal(result)
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: text}}}, nil
		}
		return req.Proposed, nil
	}

	runExample(engine.WorkerFunc(decide), "What's the weather in San Francisco?")
	// Output:
	// user: What's the weather in San Francisco?
	// assistant: [get_weather {"city":"San Francisco"}]
	// tool get_weather: It's foggy in San Francisco.
	// assistant: It's foggy in San Francisco.
}

// runExample opens a session on an engine with worker and the fake weather
// model, sends text, waits for the answer and prints the transcript.
func runExample(worker engine.Worker, text string) {
	ctx := context.Background()
	e, err := engine.New(engine.Options{
		Worker: worker,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return weatherModel, nil }),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	s, err := e.Open(ctx, engine.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	page, err := s.Attach(ctx, engine.AttachOptions{After: s.LastSeq()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer page.Detach()
	if err := page.Send(ctx, text); err != nil {
		fmt.Println(err)
		return
	}
	// The session is idle again once the model has answered.
	answered := false
	for ev := range page.Frames(ctx) {
		answered = answered || ev.Type == engine.EventModelFinished
		if answered && ev.Type == engine.EventSessionIdle {
			break
		}
	}
	transcript, _ := s.Transcript(ctx)
	for _, m := range transcript {
		switch {
		case m.Role == model.RoleTool && m.IsError:
			fmt.Printf("tool %s (error): %s\n", m.Name, m.Content)
		case m.Role == model.RoleTool:
			fmt.Printf("tool %s: %s\n", m.Name, m.Content)
		case len(m.ToolUses) > 0:
			var calls []string
			for _, u := range m.ToolUses {
				calls = append(calls, fmt.Sprintf("[%s %s]", u.Name, u.Arguments))
			}
			fmt.Printf("%s: %s\n", m.Role, strings.Join(calls, " "))
		default:
			fmt.Printf("%s: %s\n", m.Role, m.Content)
		}
	}
}

// weatherModel is a tiny fake model: it calls get_weather for every city the
// user names, then repeats what the tool said.
var weatherModel = model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleUser {
		var uses []model.ToolUse
		for _, city := range []string{"San Francisco", "Tokyo", "Paris"} {
			if i := strings.Index(last.Content, city); i >= 0 {
				args, _ := json.Marshal(map[string]string{"city": city})
				uses = append(uses, model.ToolUse{ID: fmt.Sprintf("call_%d", i), Name: "get_weather", Arguments: string(args)})
			}
		}
		slices.SortFunc(uses, func(a, b model.ToolUse) int { return strings.Compare(a.ID, b.ID) })
		return model.Response{ToolUses: uses, StopReason: model.StopToolUse}, nil
	}
	var said []string
	for _, m := range req.Messages {
		if m.Role == model.RoleTool {
			said = append(said, m.Content)
		}
	}
	text := strings.Join(said, " ")
	onDelta(text)
	return model.Response{Text: text, StopReason: model.StopEndTurn}, nil
})
