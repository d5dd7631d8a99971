package engine

import (
	"testing"
)

// plainSchemaSeeds are schemas plain takes, each with values of every
// verdict: plain must accept only what the library accepts.
var plainSchemaSeeds = []struct {
	schema string
	values []string
}{
	{benchEchoSchema, []string{`{"text":"echo 1000"}`, `{"text":1000}`, `{}`, `{"text":"a","more":[1]}`, `[]`, `"text"`}},
	{`{"type":"object","properties":{"city":{"type":"string","minLength":2,"maxLength":5},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"enum":["metric","imperial",null,true]}},"required":["city"],"additionalProperties":false}`,
		[]string{`{"city":"Tokyo","days":3,"units":"metric"}`, `{"city":"Tōkyō"}`, `{"city":"T"}`, `{"city":"Tokyo!"}`, `{"city":"Oslo","days":1}`, `{"city":"Oslo","days":7}`,
			`{"city":"Oslo","days":0}`, `{"city":"Oslo","days":8}`, `{"city":"Oslo","days":3.0}`, `{"city":"Oslo","days":3.5}`, `{"city":"Oslo","days":1e0}`,
			`{"city":"Oslo","units":null}`, `{"city":"Oslo","units":true}`, `{"city":"Oslo","units":"kelvin"}`, `{"city":"Oslo","units":1}`, `{"city":"Oslo","extra":1}`}},
	{`{"type":["object","null"],"properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2}},"additionalProperties":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}}`,
		[]string{`null`, `{"tags":["a"]}`, `{"tags":[]}`, `{"tags":["a","b","c"]}`, `{"tags":[1]}`, `{"x":0.5}`, `{"x":0}`, `{"x":1}`, `{"x":"0.5"}`,
			`{"x":0.99999999999999999999}`, `{"x":1e-400}`, `{"x":1e400}`}},
	{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`,
		[]string{`{"n":0}`, `{"n":0.1}`, `{"n":-1}`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":true,"b":{}},"minProperties":1,"maxProperties":2}`,
		[]string{`{"a":[{"x":null}]}`, `{}`, `{"a":1,"b":2,"c":3}`, `{"b":"x"}`}},
	// Floats round: a value a hair past a bound reads as the bound itself.
	{`{"type":"number","minimum":1,"maximum":2}`, []string{`0.99999999999999999999`, `1`, `1.00000000000000000001`, `1.5`, `2`, `2.00000000000000000001`, `-5`}},
	{`{"type":"boolean"}`, []string{`true`, `false`, `"true"`, `null`}},
	{`true`, []string{`1`, `{}`, `"x"`}},
}

// notPlain are schemas plain leaves to the library.
var notPlain = []string{
	`false`,
	`{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`,
	`{"properties":{"a":{"type":"string","pattern":"^a"}}}`,
	`{"properties":{"a":{"type":"string","format":"email"}}}`,
	`{"anyOf":[{"type":"string"},{"type":"number"}]}`,
	`{"properties":{"a":{"oneOf":[{"type":"string"}]}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`,
	`{"prefixItems":[{"type":"string"}]}`,
	`{"enum":[1,2]}`,
	`{"const":"a"}`,
	`{"type":"number","multipleOf":2}`,
	`{"type":"array","uniqueItems":true}`,
	`{"patternProperties":{"^x":{"type":"string"}}}`,
	`{"properties":{"a":{"not":{"type":"string"}}}}`,
	`{"additionalProperties":{"if":{"type":"string"},"then":{"minLength":1}}}`,
	`{"type":"array","contains":{"type":"string"}}`,
	`{"dependentRequired":{"a":["b"]}}`,
	`{"unevaluatedProperties":false}`,
}

func TestPlainSchemaAgreesWithLibrary(t *testing.T) {
	for _, c := range plainSchemaSeeds {
		s, err := compileSchema("t", "input", []byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if s.plain == nil {
			t.Errorf("%s: not taken plainly", c.schema)
			continue
		}
		for _, text := range c.values {
			checkPlainSchema(t, s, c.schema, text)
		}
	}
	for _, text := range notPlain {
		s, err := compileSchema("t", "input", []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if s.plain != nil {
			t.Errorf("%s: taken plainly; it must go to the library", text)
		}
	}
}

// TestPlainSchemaAcceptsTheUsualValues: the values plain is for never reach
// the library, or it does no good.
func TestPlainSchemaAcceptsTheUsualValues(t *testing.T) {
	for _, c := range []struct{ schema, value string }{
		{benchEchoSchema, `{"text":"echo 1000"}`},
		{plainSchemaSeeds[1].schema, `{"city":"Tokyo","days":3,"units":"metric"}`},
		{plainSchemaSeeds[1].schema, `{"city":"Oslo","units":null}`},
		{plainSchemaSeeds[2].schema, `{"tags":["a"],"x":0.5}`},
		{plainSchemaSeeds[2].schema, `null`},
		{plainSchemaSeeds[3].schema, `{"n":0.1}`},
		{plainSchemaSeeds[4].schema, `{"a":[{"x":null}]}`},
	} {
		s, err := compileSchema("t", "input", []byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeJSON(c.value)
		if err != nil {
			t.Fatal(err)
		}
		if s.plain == nil || !s.plain.accepts(v) {
			t.Errorf("%s: %s went to the library", c.schema, c.value)
		}
	}
}

func FuzzPlainSchema(f *testing.F) {
	for _, c := range plainSchemaSeeds {
		for _, v := range c.values {
			f.Add(c.schema, v)
		}
	}
	f.Fuzz(func(t *testing.T, schemaText, value string) {
		s, err := compileSchema("t", "input", []byte(schemaText))
		if err != nil || s == nil || s.plain == nil {
			return
		}
		checkPlainSchema(t, s, schemaText, value)
	})
}

// checkPlainSchema fails when plain accepts a value the library refuses.
func checkPlainSchema(t *testing.T, s *schema, schemaText, text string) {
	t.Helper()
	v, err := decodeJSON(text)
	if err != nil {
		return
	}
	libraryErr := s.compiled.Validate(v)
	if s.plain.accepts(v) && libraryErr != nil {
		t.Errorf("schema %s, value %s: plain accepts it, the library says %v", schemaText, text, libraryErr)
	}
	if got := s.Validate(v); (got == nil) != (libraryErr == nil) {
		t.Errorf("schema %s, value %s: Validate says %v, the library %v", schemaText, text, got, libraryErr)
	}
}
