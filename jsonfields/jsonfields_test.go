package jsonfields_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/clienttools/gateway/jsonfields"
)

// The names are the members encoding/json writes for the type, in order.
func TestNamesAreEncodingJSONs(t *testing.T) {
	type sample struct {
		ID       string `json:"id"`
		Attempt  int    `json:"attempt,omitempty"`
		Untagged bool
		Skipped  string `json:"-"`
		hidden   string // unexported: no member
		Args     []int  `json:",omitempty"`
	}
	got := jsonfields.Names(reflect.TypeFor[sample]())
	want := []string{"id", "attempt", "Untagged", "Args"}
	if !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	// encoding/json agrees: every member it writes, in that order.
	b, err := json.Marshal(sample{ID: "x", Attempt: 1, Untagged: true, Args: []int{1}, hidden: "h"})
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var written []string
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		written = append(written, k.(string))
		var skip json.RawMessage
		_ = dec.Decode(&skip)
	}
	if !slices.Equal(written, want) {
		t.Errorf("encoding/json writes %v, want %v", written, want)
	}
	if f := jsonfields.Of(reflect.TypeFor[sample]()); f[3].Type != reflect.TypeFor[[]int]() {
		t.Errorf("Of's Args type = %v", f[3].Type)
	}
}

// Kind names the JSON value each Go type decodes from, as error texts say it.
func TestKind(t *testing.T) {
	for _, tc := range []struct {
		t    reflect.Type
		want string
	}{
		{reflect.TypeFor[string](), "a string"},
		{reflect.TypeFor[bool](), "a boolean"},
		{reflect.TypeFor[int](), "a whole number"},
		{reflect.TypeFor[uint8](), "a whole number"},
		{reflect.TypeFor[float64](), "a number"},
		{reflect.TypeFor[*float64](), "a number"},
		{reflect.TypeFor[[]string](), "an array"},
		{reflect.TypeFor[[2]int](), "an array"},
		{reflect.TypeFor[map[string]int](), "an object"},
		{reflect.TypeFor[struct{ A int }](), "an object"},
	} {
		if got := jsonfields.Kind(tc.t); got != tc.want {
			t.Errorf("Kind(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestUnknown: a member the type has no field for is found at any depth, by
// its path; free JSON (json.RawMessage) is not looked into; names match in
// any case, as encoding/json matches them; allow spares top-level members.
func TestUnknown(t *testing.T) {
	type leaf struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema,omitempty"`
	}
	type root struct {
		Model string           `json:"model"`
		Tools []leaf           `json:"tools"`
		Limit *struct{ N int } `json:"limit"`
		ByKey map[string]leaf  `json:"byKey"`
	}
	for _, tc := range []struct {
		data  string
		allow []string
		want  string
	}{
		{`{"model":"m","tools":[{"name":"a","schema":{"anything":[1]}}]}`, nil, ""},
		{`{"Model":"m","TOOLS":[]}`, nil, ""},
		{`{"model":"m","modle":"x"}`, nil, "modle"},
		{`{"tools":[{"name":"a"},{"name":"b","inputs":{}}]}`, nil, "tools[1].inputs"},
		{`{"limit":{"N":1,"M":2}}`, nil, "limit.M"},
		{`{"byKey":{"k":{"nme":"x"}}}`, nil, "byKey.k.nme"},
		{`{"type":"x","model":"m"}`, []string{"type"}, ""},
		{`{"Type":"x","Model":"m"}`, []string{"type"}, ""}, // as encoding/json, and peekType, take it
		{`{"type":"x"}`, nil, "type"},
		{`{"tools":"not an array"}`, nil, ""}, // a kind json.Unmarshal refuses
		{`not JSON`, nil, ""},
	} {
		if got := jsonfields.Unknown([]byte(tc.data), reflect.TypeFor[root](), tc.allow...); got != tc.want {
			t.Errorf("Unknown(%s, allow %v) = %q, want %q", tc.data, tc.allow, got, tc.want)
		}
	}
}

// TestArticle: encoding/json's names of the values it met, said as a person
// writing JSON says them; a number it quotes ("number 1.5") is a number.
func TestArticle(t *testing.T) {
	for in, want := range map[string]string{"string": "a string", "bool": "a boolean", "number": "a number", "number 1.5": "a number", "array": "an array", "object": "an object"} {
		if got := jsonfields.Article(in); got != want {
			t.Errorf("Article(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkUnknownLargeRaw is a tool.result whose result holds 1 MiB of
// JSON: what a json.RawMessage field holds is skipped, not decoded.
func BenchmarkUnknownLargeRaw(b *testing.B) {
	type result struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	var big bytes.Buffer
	big.WriteString(`{"type":"tool.result","id":"call_1","result":[`)
	for i := 0; big.Len() < 1<<20; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`{"n":1,"text":"a line of a long result"}`)
	}
	big.WriteString(`]}`)
	data := big.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if p := jsonfields.Unknown(data, reflect.TypeFor[result](), "type"); p != "" {
			b.Fatalf("unknown %q", p)
		}
	}
}
