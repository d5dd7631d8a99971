package providers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/anthropic"
	"github.com/clienttools/gateway/engine/model/openai"
)

// Environment variables New reads, through the getenv it is given, for the
// Config fields left empty.
const (
	EnvAnthropicAPIKey  = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	EnvOpenAIAPIKey     = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvOpenAIModels     = "OPENAI_MODELS"
)

// Model ids and prefixes with a fixed meaning.
const (
	// ScriptedID is the deterministic offline model.
	ScriptedID = "scripted"
	// ClaudePrefix starts every Claude model id; such ids go to Anthropic.
	ClaudePrefix = "claude-"
	// OpenAIPrefix sends any model to the OpenAI-compatible server, with the
	// prefix stripped: "openai:llama3.1:8b" asks that server for
	// "llama3.1:8b".
	OpenAIPrefix = "openai:"
)

// DefaultOpenAIModels are the prefixes routed to the OpenAI-compatible
// server when neither Config.OpenAIModels nor OPENAI_MODELS names any: the
// families of OpenAI's own models.
var DefaultOpenAIModels = []string{"gpt-", "chatgpt-", "o1", "o3", "o4"}

// ErrNotConfigured: the model id belongs to a provider that has no key or
// server configured. Errors that wrap it also wrap model.ErrUnknownModel.
var ErrNotConfigured = errors.New("provider not configured")

// Config says which providers exist. Fields left empty are filled from the
// environment (see the Env constants), so a flag, copied into Config by the
// caller, wins over its environment variable.
type Config struct {
	// Anthropic configures Claude. APIKey defaults to ANTHROPIC_API_KEY and
	// BaseURL to ANTHROPIC_BASE_URL; without a key, Claude ids fail to resolve.
	Anthropic anthropic.Options
	// OpenAI configures the OpenAI-compatible server. APIKey defaults to
	// OPENAI_API_KEY and BaseURL to OPENAI_BASE_URL; with neither, it is not
	// configured. A key alone means OpenAI itself.
	OpenAI openai.Options
	// OpenAIModels are the model-id prefixes routed to the OpenAI-compatible
	// server, besides "openai:". Empty: OPENAI_MODELS, comma-separated, else
	// DefaultOpenAIModels. They are checked before "claude-", so listing it
	// sends Claude ids through an OpenAI-compatible proxy.
	OpenAIModels []string
	// Scripted serves the id "scripted"; nil leaves it unserved.
	Scripted model.Model
}

// Resolver routes model ids to providers. Build it with New.
type Resolver struct {
	claude   *anthropic.Model // nil without a key
	openai   *openai.Model    // nil when not configured
	prefixes []string
	scripted model.Model
}

var _ model.Resolver = (*Resolver)(nil)

// New builds every configured provider's client once, so Resolve only picks
// one. getenv is typically os.Getenv; nil reads nothing. It fails on a base
// URL that is not an http(s) URL.
func New(cfg Config, getenv func(string) string) (*Resolver, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	r := &Resolver{scripted: cfg.Scripted}

	a := cfg.Anthropic
	a.APIKey = or(a.APIKey, getenv(EnvAnthropicAPIKey))
	a.BaseURL = or(a.BaseURL, getenv(EnvAnthropicBaseURL))
	if a.APIKey != "" || a.BaseURL != "" {
		m, err := anthropic.New(a) // a bad base URL is refused with or without a key
		if err != nil {
			return nil, fmt.Errorf("failed to configure Anthropic (its base URL: %s, or Config.Anthropic.BaseURL): %w", EnvAnthropicBaseURL, err)
		}
		if a.APIKey != "" {
			r.claude = m
		}
	}

	o := cfg.OpenAI
	o.APIKey = or(o.APIKey, getenv(EnvOpenAIAPIKey))
	o.BaseURL = or(o.BaseURL, getenv(EnvOpenAIBaseURL))
	if o.APIKey != "" || o.BaseURL != "" {
		m, err := openai.New(o)
		if err != nil {
			return nil, fmt.Errorf("failed to configure the OpenAI-compatible server (its base URL: %s, or Config.OpenAI.BaseURL): %w", EnvOpenAIBaseURL, err)
		}
		r.openai = m
	}

	r.prefixes = clean(cfg.OpenAIModels)
	if len(r.prefixes) == 0 {
		r.prefixes = clean(strings.Split(getenv(EnvOpenAIModels), ","))
	}
	if len(r.prefixes) == 0 {
		r.prefixes = DefaultOpenAIModels
	}
	return r, nil
}

// Resolve returns the Model serving modelID: "scripted", "openai:<model>",
// an id starting with one of the OpenAI prefixes, or "claude-...". An id no
// configured provider serves gives an error wrapping model.ErrUnknownModel
// that names the id and what is configured.
func (r *Resolver) Resolve(modelID string) (model.Model, error) {
	switch {
	case modelID == ScriptedID:
		if r.scripted == nil {
			return nil, r.unknown(modelID)
		}
		return r.scripted, nil
	case strings.HasPrefix(modelID, OpenAIPrefix):
		name := strings.TrimPrefix(modelID, OpenAIPrefix)
		if name == "" {
			return nil, fmt.Errorf("%w %q: name the model after %q", model.ErrUnknownModel, modelID, OpenAIPrefix)
		}
		return r.viaOpenAI(modelID, name)
	case hasPrefix(modelID, r.prefixes):
		return r.viaOpenAI(modelID, modelID)
	case strings.HasPrefix(modelID, ClaudePrefix):
		if r.claude == nil {
			return nil, fmt.Errorf("%w %q: %w: set %s to use Claude",
				model.ErrUnknownModel, modelID, ErrNotConfigured, EnvAnthropicAPIKey)
		}
		return named(r.claude, modelID), nil
	default:
		return nil, r.unknown(modelID)
	}
}

// Provider names what serves modelID, as Resolve routes it: "Claude",
// "OpenAI-compatible" or "scripted"; "" when nothing configured does.
func (r *Resolver) Provider(modelID string) string {
	switch {
	case modelID == ScriptedID && r.scripted != nil:
		return "scripted"
	case strings.HasPrefix(modelID, OpenAIPrefix) || hasPrefix(modelID, r.prefixes):
		if r.openai != nil {
			return "OpenAI-compatible"
		}
	case strings.HasPrefix(modelID, ClaudePrefix) && r.claude != nil:
		return "Claude"
	}
	return ""
}

func (r *Resolver) viaOpenAI(modelID, name string) (model.Model, error) {
	if r.openai == nil {
		return nil, fmt.Errorf("%w %q: %w: set %s for OpenAI, or %s (--openai-base-url) for another OpenAI-compatible server",
			model.ErrUnknownModel, modelID, ErrNotConfigured, EnvOpenAIAPIKey, EnvOpenAIBaseURL)
	}
	return named(r.openai, name), nil
}

func (r *Resolver) unknown(modelID string) error {
	return fmt.Errorf("%w %q; configured: %s", model.ErrUnknownModel, modelID, strings.Join(r.Configured(), "; "))
}

// Configured describes the routes that work, for error messages and a
// startup log line. It never includes a key or a URL.
func (r *Resolver) Configured() []string {
	var routes []string
	if r.claude != nil {
		routes = append(routes, ClaudePrefix+"* (Anthropic)")
	}
	if r.openai != nil {
		ids := []string{OpenAIPrefix + "<model>"}
		for _, p := range r.prefixes {
			ids = append(ids, p+"*")
		}
		routes = append(routes, strings.Join(ids, ", ")+" (OpenAI-compatible)")
	}
	if r.scripted != nil {
		routes = append(routes, ScriptedID)
	}
	if len(routes) == 0 {
		return []string{fmt.Sprintf("nothing (set %s, %s or %s)", EnvAnthropicAPIKey, EnvOpenAIAPIKey, EnvOpenAIBaseURL)}
	}
	return routes
}

// named sends every request under the provider's name for the model, which
// for "openai:<model>" is not the id the agent config used.
func named(m model.Model, name string) model.Model {
	return model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		req.Model = name
		return m.Generate(ctx, req, onDelta)
	})
}

func hasPrefix(id string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// clean trims the prefixes and drops empty ones, which would match every id.
func clean(prefixes []string) []string {
	var out []string
	for _, p := range prefixes {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
