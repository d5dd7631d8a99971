package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/anthropic"
	"github.com/clienttools/gateway/engine/model/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	claudeKey = "sk-ant-secret-1"
	openaiKey = "sk-proj-secret-2"
)

// fake is a server that answers one minimal turn in its API's SSE and
// remembers the model ids it was asked for.
type fake struct {
	*httptest.Server
	mu     sync.Mutex
	models []string
}

func newFake(t *testing.T, events string) *fake {
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Model string }
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		f.mu.Lock()
		f.models = append(f.models, body.Model)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.models...)
}

const claudeTurn = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"claude\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

const openaiTurn = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"openai\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

var scripted = model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	return model.Response{Text: "scripted", StopReason: model.StopEndTurn}, nil
})

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// setup returns a Resolver over fake servers, configured through the
// environment the way the gateway's command configures it.
func setup(t *testing.T, vars map[string]string, cfg Config) (*Resolver, *fake, *fake) {
	t.Helper()
	claude, oai := newFake(t, claudeTurn), newFake(t, openaiTurn)
	all := map[string]string{
		EnvAnthropicAPIKey:  claudeKey,
		EnvAnthropicBaseURL: claude.URL,
		EnvOpenAIAPIKey:     openaiKey,
		EnvOpenAIBaseURL:    oai.URL + "/v1",
	}
	for k, v := range vars {
		all[k] = v
	}
	cfg.Anthropic.HTTPClient = claude.Client()
	cfg.OpenAI.HTTPClient = oai.Client()
	r, err := New(cfg, env(all))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r, claude, oai
}

func TestResolveRoutes(t *testing.T) {
	tests := []struct {
		name, id string
		vars     map[string]string
		cfg      Config
		text     string // which provider answered
		asked    string // the model name the provider was asked for
	}{
		{name: "claude", id: "claude-sonnet-4-5", text: "claude", asked: "claude-sonnet-4-5"},
		{name: "openai: prefix is stripped", id: "openai:llama3.1:8b", text: "openai", asked: "llama3.1:8b"},
		{name: "default OpenAI prefix", id: "gpt-4o", text: "openai", asked: "gpt-4o"},
		{name: "OPENAI_MODELS prefixes", id: "qwen2.5-coder", vars: map[string]string{EnvOpenAIModels: " llama, qwen ,"}, text: "openai", asked: "qwen2.5-coder"},
		{name: "Config.OpenAIModels wins over OPENAI_MODELS", id: "mistral-small", vars: map[string]string{EnvOpenAIModels: "llama"}, cfg: Config{OpenAIModels: []string{"mistral"}}, text: "openai", asked: "mistral-small"},
		{name: "a configured prefix may take claude ids to a proxy", id: "claude-haiku", cfg: Config{OpenAIModels: []string{"claude-"}}, text: "openai", asked: "claude-haiku"},
		{name: "scripted", id: "scripted", cfg: Config{Scripted: scripted}, text: "scripted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, claude, oai := setup(t, tt.vars, tt.cfg)
			m, err := r.Resolve(tt.id)
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.id, err)
			}
			resp, err := m.Generate(context.Background(), model.Request{Model: tt.id, Stream: true, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.Text != tt.text {
				t.Errorf("answered by %q, want %q", resp.Text, tt.text)
			}
			asked := append(claude.asked(), oai.asked()...)
			if tt.asked == "" && len(asked) != 0 || tt.asked != "" && (len(asked) != 1 || asked[0] != tt.asked) {
				t.Errorf("providers were asked for %q, want %q", asked, tt.asked)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name, id      string
		vars          map[string]string
		cfg           Config
		notConfigured bool
		mention       []string
	}{
		{
			name: "claude without a key", id: "claude-opus-4", vars: map[string]string{EnvAnthropicAPIKey: ""},
			notConfigured: true, mention: []string{`"claude-opus-4"`, "ANTHROPIC_API_KEY"},
		},
		{
			name: "gpt without an OpenAI server", id: "gpt-4o", vars: map[string]string{EnvOpenAIAPIKey: "", EnvOpenAIBaseURL: ""},
			notConfigured: true, mention: []string{`"gpt-4o"`, "OPENAI_API_KEY", "OPENAI_BASE_URL"},
		},
		{
			name: "openai: without an OpenAI server", id: "openai:llama3", vars: map[string]string{EnvOpenAIAPIKey: "", EnvOpenAIBaseURL: ""},
			notConfigured: true, mention: []string{`"openai:llama3"`, "OPENAI_BASE_URL"},
		},
		{
			name: "unknown id lists what is configured", id: "mistral-large", cfg: Config{Scripted: scripted},
			mention: []string{`"mistral-large"`, "claude-* (Anthropic)", "openai:<model>, gpt-*", "(OpenAI-compatible)", "scripted"},
		},
		{
			name: "scripted when none was injected", id: "scripted",
			mention: []string{`"scripted"`, "claude-*"},
		},
		{
			name: "nothing configured", id: "llama3", vars: map[string]string{EnvAnthropicAPIKey: "", EnvOpenAIAPIKey: "", EnvOpenAIBaseURL: ""},
			mention: []string{`"llama3"`, "nothing (set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL)"},
		},
		{name: "openai: with no model", id: "openai:", mention: []string{`"openai:"`}},
		{name: "empty id", id: "", mention: []string{`""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _ := setup(t, tt.vars, tt.cfg)
			m, err := r.Resolve(tt.id)
			if err == nil || m != nil {
				t.Fatalf("Resolve(%q) = %v, %v; want an error", tt.id, m, err)
			}
			if !errors.Is(err, model.ErrUnknownModel) {
				t.Errorf("error %q does not wrap model.ErrUnknownModel", err)
			}
			if got := errors.Is(err, ErrNotConfigured); got != tt.notConfigured {
				t.Errorf("errors.Is(%q, ErrNotConfigured) = %v, want %v", err, got, tt.notConfigured)
			}
			for _, s := range tt.mention {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			for _, key := range []string{claudeKey, openaiKey} {
				if strings.Contains(err.Error(), key) {
					t.Errorf("error %q contains a key", err)
				}
			}
		})
	}
}

func TestConfigWinsOverEnvironment(t *testing.T) {
	claude, oai := newFake(t, claudeTurn), newFake(t, openaiTurn)
	r, err := New(Config{
		Anthropic: anthropic.Options{BaseURL: claude.URL, HTTPClient: claude.Client()},
		OpenAI:    openai.Options{BaseURL: oai.URL + "/v1", HTTPClient: oai.Client()},
	}, env(map[string]string{
		EnvAnthropicAPIKey:  claudeKey,
		EnvAnthropicBaseURL: "http://127.0.0.1:1", // nothing listens there
		EnvOpenAIBaseURL:    "http://127.0.0.1:1/v1",
	}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, id := range []string{"claude-x", "openai:y"} {
		m, err := r.Resolve(id)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", id, err)
		}
		if _, err := m.Generate(context.Background(), model.Request{Model: id, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil); err != nil {
			t.Errorf("Generate(%q): %v; the environment's base URL was used", id, err)
		}
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	tests := []map[string]string{
		{EnvOpenAIBaseURL: "localhost:8080/v1"},
		{EnvAnthropicAPIKey: claudeKey, EnvAnthropicBaseURL: "api.anthropic.com"},
		{EnvAnthropicBaseURL: "not a url"}, // no key yet: still a mistake to say now
	}
	for _, vars := range tests {
		_, err := New(Config{}, env(vars))
		if err == nil {
			t.Errorf("New with %v succeeded, want an error", vars)
			continue
		}
		// Quoted as written (a password would be masked), not escaped.
		for _, v := range vars {
			if v != claudeKey && !strings.Contains(err.Error(), fmt.Sprintf("%q", v)) {
				t.Errorf("New with %v: %v, want the URL quoted as written", vars, err)
			}
		}
	}
}

func TestNewWithNilGetenv(t *testing.T) {
	r, err := New(Config{Scripted: scripted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Configured(); len(got) != 1 || got[0] != ScriptedID {
		t.Errorf("Configured() = %q, want only %q", got, ScriptedID)
	}
}

func TestResolveIsCheap(t *testing.T) {
	// Clients are built once, in New; a Resolve is a prefix check and, at
	// most, one small wrapper.
	r, _, _ := setup(t, nil, Config{Scripted: scripted})
	for _, id := range []string{"claude-x", "openai:y", "gpt-4o", "scripted"} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := r.Resolve(id); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("Resolve(%q) allocates %v times, want at most 1", id, allocs)
		}
	}
}
