package scripted_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
)

// A script answers a user message by its first matching rule, and words the
// tool results when the transcript ends with them.
func Example() {
	m, err := scripted.Load(strings.NewReader(`{
		"chunkWords": 2,
		"rules": [{
			"match": "(?i)weather in (?P<city>[\\p{L} ]+?)\\??$",
			"say": "Let me check the weather in ${city}.",
			"tools": [{"name": "get_weather", "arguments": {"city": "${city}"}}]
		}],
		"afterTool": [{"tool": "get_weather", "ok": "The forecast: ${result}", "error": "Sorry: ${error}"}]
	}`))
	if err != nil {
		log.Fatal(err)
	}

	msgs := []model.Message{{Role: model.RoleUser, Content: "What's the weather in Tokyo?"}}
	resp, _ := m.Generate(context.Background(), model.Request{Messages: msgs, Stream: true}, func(delta string) {
		fmt.Printf("delta %q\n", delta)
	})
	fmt.Println(resp.StopReason, resp.ToolUses[0].ID, resp.ToolUses[0].Name, resp.ToolUses[0].Arguments)

	// The engine runs the tool and prompts again with its result.
	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, Content: resp.Text, ToolUses: resp.ToolUses},
		model.Message{Role: model.RoleTool, ToolUseID: "call_1", Name: "get_weather", Content: "It's clear in Tokyo."},
	)
	resp, _ = m.Generate(context.Background(), model.Request{Messages: msgs}, nil)
	fmt.Println(resp.StopReason, resp.Text)
	// Output:
	// delta "Let me "
	// delta "check the "
	// delta "weather in "
	// delta "Tokyo."
	// tool_use call_1 get_weather {"city":"Tokyo"}
	// end_turn The forecast: It's clear in Tokyo.
}

// Load errors say where the script is wrong.
func ExampleLoad_error() {
	_, err := scripted.Load(strings.NewReader(`{"rules": [{"match": "in (?P<city>\\w+)", "say": "In ${town}."}]}`))
	fmt.Println(err)
	// Output:
	// scripted: rules[0].say: ${town} is not a group of rules[0].match (its groups: city, 0, 1)
}

// The demo script is the gateway's offline default.
func ExampleDemo() {
	m, err := scripted.New(scripted.Demo())
	if err != nil {
		log.Fatal(err)
	}
	msgs := []model.Message{{Role: model.RoleUser, Content: "delete my draft"}}
	resp, _ := m.Generate(context.Background(), model.Request{Messages: msgs}, nil)
	fmt.Println(resp.ToolUses[0].Name, resp.ToolUses[0].Arguments)

	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, Content: resp.Text, ToolUses: resp.ToolUses},
		model.Message{Role: model.RoleTool, ToolUseID: resp.ToolUses[0].ID, Name: "confirm", Content: `{"approved": false}`},
	)
	resp, _ = m.Generate(context.Background(), model.Request{Messages: msgs}, nil)
	fmt.Println(resp.Text)
	// Output:
	// confirm {"question":"Delete your draft?"}
	// Okay, I kept your draft.
}
