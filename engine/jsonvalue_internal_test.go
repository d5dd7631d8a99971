package engine

import (
	"reflect"
	"strings"
	"testing"
)

var quickJSONSeeds = []string{
	`{"text":"echo 1000"}`, `{"city":"Tokyo","days":3,"units":"metric"}`, ` { "a" : [ 1 , -2.5e+3 , true , false , null ] } `,
	`{"a":{"b":{"c":[]}}}`, `{}`, `[]`, `"x"`, `0`, `-0.0E-0`, `{"é":"ü"}`, `{"a":1,"a":2}`,
	`{"a":"b\nc"}`, `{"a":"\u00e9"}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `-`, `.5`, `{"a" 1}`, `{"a":1} x`, `{"a":1}{}`,
	"{\"a\":\"\xff\"}", "{\"a\":\"\x01\"}", `tru`, `nul`, `[` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 101),
	`{"n":12345678901234567890123}`, "\t\r\n[1]\n",
}

// TestQuickJSONIsEncodingJSON: what quickJSON reads, it reads as
// encoding/json does; what it declines, encoding/json reads or refuses.
func TestQuickJSONIsEncodingJSON(t *testing.T) {
	for _, s := range quickJSONSeeds {
		checkQuickJSON(t, s)
	}
	// The usual values are read, not declined (a member given twice is
	// left to encoding/json, which names it).
	for _, s := range quickJSONSeeds[:10] {
		if _, ok := quickJSON(s); !ok {
			t.Errorf("quickJSON declined %q", s)
		}
	}
}

func FuzzQuickJSON(f *testing.F) {
	for _, s := range quickJSONSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkQuickJSON(t, s) })
}

func checkQuickJSON(t *testing.T, s string) {
	t.Helper()
	got, ok := quickJSON(s)
	want, err := decodeJSONStd(s) // how decodeJSON read every value before quickJSON
	if !ok {
		return // encoding/json reads it, as before
	}
	if err != nil {
		t.Fatalf("quickJSON read %q, which encoding/json refuses: %v", s, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("quickJSON(%q) = %#v, encoding/json reads %#v", s, got, want)
	}
	if d, err := decodeJSON(s); err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf("decodeJSON(%q) = %#v, %v", s, d, err)
	}
}
