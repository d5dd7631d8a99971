package demo_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
)

// TestGetWeatherIsTheSeeds: the seed's forecasts and its error text.
func TestGetWeatherIsTheSeeds(t *testing.T) {
	tests := []struct {
		city, want, err string
	}{
		{"San Francisco", "It's foggy in San Francisco.", ""},
		{"Tokyo", "It's clear in Tokyo.", ""},
		{"tokyo", "It's clear in Tokyo.", ""},
		{"SAN FRANCISCO", "It's foggy in San Francisco.", ""},
		{"Atlantis", "", "No forecast for Atlantis."},
	}
	for _, tt := range tests {
		args, _ := json.Marshal(map[string]string{"city": tt.city})
		got, err := demo.GetWeather.Exec(context.Background(), args)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("%s: error %v, want %q", tt.city, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s: %v, %v; want %q", tt.city, got, err, tt.want)
		}
	}
}

// TestDemoAgentOpens: every demo schema compiles and the demo script's
// model serves the agent, so `go run ./cmd/gateway` starts a chat.
func TestDemoAgentOpens(t *testing.T) {
	sm, err := scripted.New(scripted.Demo())
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{
		Worker: demo.Worker("scripted"),
		Models: model.ResolverFunc(func(string) (model.Model, error) { return sm, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Open(ctx, engine.OpenOptions{}); err != nil {
		t.Fatalf("the demo agent does not open: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// demoPage opens a session of the demo agent on m, attaches a page and
// sends text; the engine closes and the context ends with the test.
func demoPage(t *testing.T, m model.Model, text string) (context.Context, *engine.Page) {
	t.Helper()
	e, err := engine.New(engine.Options{
		Worker: demo.Worker("scripted"),
		Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	t.Cleanup(cancel)
	s, err := e.Open(ctx, engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Attach(ctx, engine.AttachOptions{Buffer: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if err := page.Send(ctx, text); err != nil {
		t.Fatal(err)
	}
	return ctx, page
}

// TestLoopStopsAtTheGuard: "test loop" makes the demo's scripted model call
// next_page after every result, for ever (before the guards, one message
// made 34,816 model turns in 2 seconds); the default guard stops it at 25
// model turns, and the page is told why.
func TestLoopStopsAtTheGuard(t *testing.T) {
	script := scripted.Demo()
	script.Delay = "0s" // as fast as the loop can go
	sm, err := scripted.New(script)
	if err != nil {
		t.Fatal(err)
	}
	var turns atomic.Int64
	counting := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		turns.Add(1)
		return sm.Generate(ctx, req, onDelta)
	})
	ctx, page := demoPage(t, counting, "test loop")
	var tripped struct{ Guard, Message string }
	for ev := range page.Frames(ctx) {
		if ev.Type == engine.EventGuardTripped {
			_ = json.Unmarshal(ev.Frame, &tripped)
		}
		if ev.Type == engine.EventSessionIdle && tripped.Guard != "" {
			break
		}
	}
	if tripped.Guard != engine.GuardModelTurns || !strings.Contains(tripped.Message, "25 turns") {
		t.Fatalf("guard.tripped %+v, want model_turns at 25 (ctx: %v)", tripped, ctx.Err())
	}
	if n := turns.Load(); n != int64(engine.DefaultLimits.MaxModelTurns) {
		t.Errorf("%d model turns, want %d", n, engine.DefaultLimits.MaxModelTurns)
	}
}

// TestWithPageTools: a worker's agent gains the demo page's own browser
// tools it lacks, not its test tools, and keeps its own, including one of
// the same name.
func TestWithPageTools(t *testing.T) {
	mine := engine.AgentTool{Name: "confirm", Description: "the worker's own confirm", Handler: engine.HandlerClient}
	w := demo.WithPageTools(engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		return engine.Decision{Agent: &engine.AgentConfig{Model: "scripted", Tools: []engine.AgentTool{{Name: "get_weather"}, mine}}}, nil
	}))
	d, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, tool := range d.Agent.Tools {
		names[tool.Name] = tool.Description
	}
	if len(d.Agent.Tools) != 1+len(demo.PageTools) || names["confirm"] != mine.Description || names["get_local_time"] == "" || names["get_weather"] != "" {
		t.Errorf("tools %v", names)
	}
	for _, test := range demo.TestTools {
		if _, ok := names[test.Name]; ok {
			t.Errorf("the worker's agent got the demo's test tool %s", test.Name)
		}
	}
}

// TestResearchDelegates: "research the weather in three cities" makes the
// demo's model call research_weather, which the worker delegates to a
// helper agent; the helper calls get_weather three times (its events
// nested under the call), and its summary is the call's result.
func TestResearchDelegates(t *testing.T) {
	script := scripted.Demo()
	script.Delay = "0s"
	sm, err := scripted.New(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, page := demoPage(t, sm, "research the weather in three cities")
	var research string // the research_weather call's id
	var weather []string
	var reply string
	for ev := range page.Frames(ctx) {
		var f struct {
			ID, Name, Parent, Result string
			OK                       bool
			Message                  struct{ Role, Content string }
		}
		_ = json.Unmarshal(ev.Frame, &f)
		switch {
		case ev.Type == engine.EventToolDelegated && f.Name == "research_weather":
			research = f.ID
		case ev.Type == engine.EventToolFinished && f.Name == "get_weather" && research != "" && f.Parent == research && f.OK:
			weather = append(weather, f.Result)
		case ev.Type == engine.EventMessage && f.Parent == "" && f.Message.Role == "assistant":
			reply = f.Message.Content
		}
		if ev.Type == engine.EventSessionIdle && research != "" {
			break
		}
	}
	if len(weather) != 2 { // Paris has no forecast: its call fails, and the helper says so
		t.Errorf("the helper's get_weather results %q, want San Francisco's and Tokyo's", weather)
	}
	want := "The helper agent's research: get_weather returned: It's foggy in San Francisco. get_weather returned: It's clear in Tokyo. get_weather failed: No forecast for Paris."
	if reply != want {
		t.Errorf("the reply is %q, want %q", reply, want)
	}
}
