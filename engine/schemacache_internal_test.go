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
