package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// memberCorpus are frames the one-pass reader must read as encoding/json
// does: odd spacing, duplicate names, braces and quotes inside strings,
// nested values, escapes in names (the general path), too many members.
var memberCorpus = []string{
	`{"type":"tool.result","id":"toolu_1","attempt":1,"result":{"text":"echo 1"}}`,
	` { "type" : "message" , "content" : "a } b ] c \" d" } `,
	"{\n\t\"type\":\"tool.error\",\"id\":\"x\",\"attempt\":2,\"error\":\"no\",\"retryable\":true,\"code\":\"e\",\"detail\":[1,{\"a\":\"]\"}]}",
	`{"type":"message","type":"cancel"}`,
	`{"typ\u0065":"message","content":"hi"}`,
	`{"type":"tool.result","result":null,"id":"a","attempt":1.5}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"type":"cancel"}`,
	`{"type":"session.open","tools":["a","b"],"after":-1e3,"session":""}`,
	`{}`,
	`{"result":"\\","type":"tool.result"}`,
	`{"result":{"nested":{"deep":[[],{}]}},"x":false,"y":null}`,
}

func TestMemberSetReadsAsEncodingJSON(t *testing.T) {
	for _, frame := range memberCorpus {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(frame), &want); err != nil {
			t.Fatalf("corpus frame %s: %v", frame, err)
		}
		var m memberSet
		if err := m.read([]byte(frame)); err != nil {
			t.Errorf("read(%s): %v", frame, err)
			continue
		}
		for name, v := range want {
			got, ok := m.get(name)
			if !ok || !bytes.Equal(got, v) {
				t.Errorf("read(%s): %q = %s, %v; want %s", frame, name, got, ok, v)
			}
		}
		for _, name := range []string{"type", "id", "attempt", "result", "content", "missing"} {
			_, ok := m.get(name)
			if _, want := want[name]; ok != want {
				t.Errorf("read(%s): %q present %v, want %v", frame, name, ok, want)
			}
		}
	}
}

func FuzzMemberSet(f *testing.F) {
	for _, frame := range memberCorpus {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame string) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(frame), &want) != nil || want == nil
		var m memberSet
		err := m.read([]byte(frame))
		if (err != nil) != wantErr {
			t.Fatalf("read(%q): error %v, encoding/json's error %v", frame, err, wantErr)
		}
		for name, v := range want {
			if got, ok := m.get(name); !ok || !bytes.Equal(got, v) {
				t.Fatalf("read(%q): %q = %s, %v; want %s", frame, name, got, ok, v)
			}
		}
	})
}

// FuzzDecodePlain: the message and tool.result frames DecodeFrame reads
// on its plain path are what encoding/json decodes from them, and the
// plain readers agree with encoding/json on every value they read.
func FuzzDecodePlain(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","content":"hi"}`, `{"type":"message","content":"h\"i"}`, "{\"type\":\"message\",\"content\":\"\xff\"}",
		`{"type":"tool.result","id":"c","attempt":1,"result":{"a":1}}`, `{"type":"tool.result","id":"c","attempt":-0,"result":null}`,
		`{"type":"tool.result","id":"c","attempt":1.0,"result":1}`, `{"type":"tool.result","id":"c","attempt":01,"result":1}`,
		`{"type":"tool.result","id":"c","id":"d","attempt":2,"result":"x","attempt":3}`, `{"type":"tool.result","id":"\u0063","attempt":1,"result":[]}`,
		`{"type":"tool.result","id":"c","attempt":123456789012345678901,"result":1}`,
		`"0`, `"a"b"`, `-`, `-01`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := DecodeFrame(data)
		if err == nil {
			switch got := frame.(type) {
			case MessageFrame:
				var want MessageFrame
				if err := json.Unmarshal(data, &want); err != nil || got != want {
					t.Fatalf("DecodeFrame(%q) = %#v; encoding/json: %#v, %v", data, got, want, err)
				}
			case engine.ToolResult:
				var want engine.ToolResult
				if err := json.Unmarshal(data, &want); err != nil || got.ID != want.ID || got.Attempt != want.Attempt || !bytes.Equal(got.Result, want.Result) {
					t.Fatalf("DecodeFrame(%q) = %#v; encoding/json: %#v, %v", data, got, want, err)
				}
			}
		}
		if s, ok := plainString(data); ok {
			var want string
			if err := json.Unmarshal(data, &want); err != nil || s != want {
				t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", data, s, want, err)
			}
		}
		if n, ok := plainInt(data); ok {
			var want int
			if err := json.Unmarshal(data, &want); err != nil || n != want {
				t.Fatalf("plainInt(%q) = %d; encoding/json: %d, %v", data, n, want, err)
			}
		}
	})
}
