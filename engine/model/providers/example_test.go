package providers_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/clienttools/gateway/engine/model/providers"
)

func ExampleNew() {
	// The gateway passes os.Getenv; flags it copied into Config win over it.
	getenv := func(key string) string {
		return map[string]string{
			"ANTHROPIC_API_KEY": "sk-ant-example",
			"OPENAI_BASE_URL":   "http://localhost:8080/v1", // llama.cpp's llama-server
			"OPENAI_MODELS":     "llama,qwen",
		}[key]
	}
	r, err := providers.New(providers.Config{}, getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(strings.Join(r.Configured(), "\n"))
	for _, id := range []string{"claude-sonnet-4-5", "llama3.1:8b", "openai:gpt-oss-20b", "scripted"} {
		_, err := r.Resolve(id)
		fmt.Printf("%s: %v\n", id, err)
	}
	// Output:
	// claude-* (Anthropic)
	// openai:<model>, llama*, qwen* (OpenAI-compatible)
	// claude-sonnet-4-5: <nil>
	// llama3.1:8b: <nil>
	// openai:gpt-oss-20b: <nil>
	// scripted: no provider for model "scripted"; configured: claude-* (Anthropic); openai:<model>, llama*, qwen* (OpenAI-compatible)
}

func ExampleResolver_Resolve_notConfigured() {
	r, _ := providers.New(providers.Config{}, func(string) string { return "" })
	_, err := r.Resolve("claude-sonnet-4-5")
	fmt.Println(err)
	_, err = r.Resolve("gpt-4o")
	fmt.Println(err)
	// Output:
	// no provider for model "claude-sonnet-4-5": provider not configured: set ANTHROPIC_API_KEY to use Claude
	// no provider for model "gpt-4o": provider not configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL (--openai-base-url) for another OpenAI-compatible server
}
