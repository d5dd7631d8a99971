package httpworker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
)

// The seed's example and the CLI that serves it, from this package's folder.
const (
	nodeCLI         = "../workers/node/cli.mjs"
	seedExample     = "../examples/seed/server.mjs"
	subagentExample = "../examples/subagent/server.mjs"
)

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startNode runs `node workers/node/cli.mjs module --port 0` with secret and
// returns the URL it listens on; the process is stopped with the test. It
// skips the test when node is not on PATH.
func startNode(t *testing.T, module string, secret []byte) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	cmd := exec.Command(node, nodeCLI, module, "--port", "0", "--host", "127.0.0.1")
	cmd.Env = append(os.Environ(), "WORKER_SECRET="+string(secret))
	var stderr bytes.Buffer // read only after Wait
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start node: %v", err)
	}
	url := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case url <- m[1]:
				default:
				}
			}
		}
	}()
	stop := func(sig os.Signal) {
		cmd.Process.Signal(sig)
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-drained
		}
		cmd.Wait()
	}
	select {
	case u := <-url:
		t.Cleanup(func() {
			stop(syscall.SIGTERM)
			if cmd.ProcessState.ExitCode() != 0 {
				t.Errorf("the node worker exited with %v: %s", cmd.ProcessState, stderr.String())
			}
		})
		return u
	case <-drained:
		stop(os.Kill)
		t.Fatalf("the node worker exited before it listened (%v): %s", cmd.ProcessState, stderr.String())
	case <-time.After(30 * time.Second):
		stop(os.Kill)
		t.Fatalf("the node worker did not listen in 30s: %s", stderr.String())
	}
	return ""
}

// TestNodeSeedExample asks the seed's example, served by the Node CLI, as
// the engine would, one trigger at a time.
func TestNodeSeedExample(t *testing.T) {
	url := startNode(t, seedExample, testSecret)
	w := newWorker(t, url, Options{})
	ctx := context.Background()

	t.Run("session.start", func(t *testing.T) {
		d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
		if err != nil {
			t.Fatal(err)
		}
		want := &engine.AgentConfig{Model: "claude-haiku-4-5-20251001", Stream: true, Tools: []engine.AgentTool{{
			Name:        "get_weather",
			Description: "Get the weather for a city.",
			Input:       json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}}}
		if !reflect.DeepEqual(d, engine.Decision{Agent: want}) {
			t.Errorf("Decide = %+v, want the seed's agent %+v", d.Agent, want)
		}
	})

	for _, tt := range []struct {
		city string
		want engine.Action
	}{
		{"San Francisco", engine.ToolResult{Result: json.RawMessage(`"It's foggy in San Francisco."`)}},
		{"Tokyo", engine.ToolResult{Result: json.RawMessage(`"It's clear in Tokyo."`)}},
		{"Atlantis", engine.ToolError{Error: "No forecast for Atlantis."}},
	} {
		t.Run("tool.execute "+tt.city, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"city": tt.city})
			tr := engine.ToolExecute{ID: "call_1", Name: "get_weather", Arguments: string(args),
				Input: engine.ToolInput{Status: engine.InputValid, Value: args}, Attempt: 1,
				Deadline: engine.FormatDeadline(time.Now().Add(time.Minute))}
			d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: tr})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, engine.Decision{Actions: []engine.Action{tt.want}}) {
				t.Errorf("Decide = %#v, want %#v", d, tt.want)
			}
		})
	}

	t.Run("tool.finished gets the proposal back", func(t *testing.T) {
		proposed := engine.Decision{Actions: []engine.Action{
			engine.MessageAppend{Message: engine.Message{Role: model.RoleTool, ToolUseID: "call_1", Name: "get_weather", Content: "It's clear in Tokyo."}},
			engine.ModelPrompt{},
		}}
		d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1",
			Trigger:  engine.ToolFinished{ID: "call_1", OK: true, Name: "get_weather", Result: "It's clear in Tokyo."},
			Proposed: proposed})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, proposed) {
			t.Errorf("Decide = %#v, want the proposal %#v", d, proposed)
		}
	})

	t.Run("a wrong secret is refused", func(t *testing.T) {
		o := Options{URL: url, Secret: []byte("not the worker's secret"), Logger: quiet}
		bad, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		_, err = bad.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
		want := "the worker answered 401 Unauthorized: signature does not match"
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("Decide = %v, want %q", err, want)
		}
	})
}

// undelayedDemo is the demo script's model with no delay between chunks.
func undelayedDemo(t *testing.T) model.Model {
	t.Helper()
	script := scripted.Demo()
	script.Delay = ""
	for i := range script.Rules {
		script.Rules[i].Delay = ""
	}
	demo, err := scripted.New(script)
	if err != nil {
		t.Fatal(err)
	}
	return demo
}

// TestEngineRunsSeedExample runs the seed's example as written, in Node,
// behind a real engine session with the scripted demo model standing in for
// the seed's Claude model id.
func TestEngineRunsSeedExample(t *testing.T) {
	url := startNode(t, seedExample, testSecret)
	w := newWorker(t, url, Options{})

	demo := undelayedDemo(t)
	var mu sync.Mutex
	var resolved []string
	var received []model.Message // the tool messages the model was prompted with
	m := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleTool {
			mu.Lock()
			received = append(received, req.Messages[n-1])
			mu.Unlock()
		}
		return demo.Generate(ctx, req, onDelta)
	})
	e, err := engine.New(engine.Options{
		Worker: w,
		Models: model.ResolverFunc(func(id string) (model.Model, error) {
			mu.Lock()
			resolved = append(resolved, id)
			mu.Unlock()
			return m, nil
		}),
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer e.Close(ctx)

	s, err := e.Open(ctx, engine.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	mu.Lock()
	if !reflect.DeepEqual(resolved, []string{"claude-haiku-4-5-20251001"}) {
		t.Errorf("resolved model ids %q, want the seed's", resolved)
	}
	mu.Unlock()

	tests := []struct {
		say     string
		tool    string // the tool message the model receives
		isError bool
		reply   string // what the scripted model then says
	}{
		{"what's the weather in San Francisco", "It's foggy in San Francisco.", false, "get_weather returned: It's foggy in San Francisco."},
		{"what's the weather in Tokyo", "It's clear in Tokyo.", false, "get_weather returned: It's clear in Tokyo."},
		{"what's the weather in Atlantis", "No forecast for Atlantis.", true, "get_weather failed: No forecast for Atlantis."},
	}
	for _, tt := range tests {
		t.Run(tt.say, func(t *testing.T) {
			mu.Lock()
			received = nil
			mu.Unlock()
			page, err := s.Attach(ctx, engine.AttachOptions{After: s.LastSeq()})
			if err != nil {
				t.Fatal(err)
			}
			defer page.Detach()
			if err := page.Send(ctx, tt.say); err != nil {
				t.Fatal(err)
			}
			waitSettledAndIdle(t, ctx, page)

			mu.Lock()
			got := received
			mu.Unlock()
			if len(got) != 1 || got[0].Content != tt.tool || got[0].IsError != tt.isError || got[0].Name != "get_weather" {
				t.Errorf("the model received %+v, want one get_weather message %q (isError %v)", got, tt.tool, tt.isError)
			}
			tr, err := s.Transcript(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if last := tr[len(tr)-1]; last.Role != model.RoleAssistant || last.Content != tt.reply {
				t.Errorf("the model's reply is %+v, want %q", last, tt.reply)
			}
		})
	}
}

// waitSettledAndIdle reads events until a tool call has finished and the
// session is idle again.
func waitSettledAndIdle(t *testing.T, ctx context.Context, page *engine.Page) {
	t.Helper()
	var types []string
	finished := false
	for ev := range page.Frames(ctx) {
		types = append(types, ev.Type)
		switch ev.Type {
		case engine.EventToolFinished:
			finished = true
		case engine.EventSessionIdle:
			if finished {
				return
			}
		case engine.EventError:
			t.Errorf("session error: %s", ev.Frame)
		}
	}
	t.Fatalf("no tool.finished then session.idle (the stream ended: %v); got %v", page.Err(), types)
}

// TestEngineRunsNodeSubagent: a Node worker delegates research_weather to a
// helper agent (examples/subagent); the helper's get_weather calls reach the
// same worker with their parent, and its answer is the call's result.
func TestEngineRunsNodeSubagent(t *testing.T) {
	url := startNode(t, subagentExample, testSecret)
	w := newWorker(t, url, Options{})
	demo := undelayedDemo(t)
	e, err := engine.New(engine.Options{
		Worker: w,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return demo, nil }),
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer e.Close(ctx)
	s, err := e.Open(ctx, engine.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	page, err := s.Attach(ctx, engine.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer page.Detach()
	if err := page.Send(ctx, "research the weather in three cities"); err != nil {
		t.Fatal(err)
	}
	nested, settled := 0, false
	for ev := range page.Frames(ctx) {
		var f struct{ Parent string }
		_ = json.Unmarshal(ev.Frame, &f)
		if ev.Type == engine.EventToolFinished {
			if f.Parent != "" {
				nested++
			} else {
				settled = true
			}
		}
		if ev.Type == engine.EventSessionIdle && settled {
			break
		}
	}
	tr, err := s.Transcript(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "The helper agent's research: get_weather returned: It's foggy in San Francisco. get_weather returned: It's clear in Tokyo. get_weather failed: No forecast for Paris."
	if last := tr[len(tr)-1]; last.Content != want || nested != 3 {
		t.Errorf("the reply is %q after %d nested tool.finished; want %q after 3", last.Content, nested, want)
	}
}
