package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchemaCache: sessions of one agent share compiled schemas; a schema
// that fails names the tool of each config that declares it.
func TestSchemaCache(t *testing.T) {
	var c schemaCache
	raw := json.RawMessage(`{"type":"object","required":["city"]}`)
	a, err := c.compile("get_weather", "input", raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.compile("forecast", "input", raw)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same schema text was compiled twice")
	}
	if out, _ := c.compile("get_weather", "output", raw); out == a {
		t.Error("an output schema shares the input's cache entry")
	}
	if got := classifyInput(`{"town":"Paris"}`, b); got.Status != InputInvalid {
		t.Errorf("the cached schema classifies %+v", got)
	}
	bad := json.RawMessage(`{"type":"nope"}`)
	for _, tool := range []string{"first", "second"} {
		_, err := c.compile(tool, "input", bad)
		if err == nil || !strings.Contains(err.Error(), `tool "`+tool+`"`) {
			t.Errorf("bad schema for %s: %v", tool, err)
		}
	}
}

// TestAgentToolsFind: every declared tool is found by its name, with its
// own schemas, whatever the order of the declarations.
func TestAgentToolsFind(t *testing.T) {
	decls := []AgentTool{
		{Name: "zeta", Input: []byte(`{"type":"object","required":["z"]}`)},
		{Name: "alpha", Handler: HandlerClient},
		{Name: "mid", Input: []byte(benchEchoSchema)},
	}
	tools, err := compileTools(decls, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range decls {
		got := tools.find(decls[i].Name)
		if got == nil || got.decl != &decls[i] {
			t.Fatalf("find(%q) = %+v, want the declaration at %d", decls[i].Name, got, i)
		}
		if (got.schemas.input == nil) != (decls[i].Input == nil) {
			t.Errorf("%s: input schema %v for %s", decls[i].Name, got.schemas.input, decls[i].Input)
		}
	}
	if v, _ := decodeJSON(`{"z":1}`); tools.find("zeta").schemas.input.Validate(v) != nil {
		t.Error("zeta's schema is not its own")
	}
	if tools.find("beta") != nil || tools.find("") != nil {
		t.Error("found a tool nobody declared")
	}
}
