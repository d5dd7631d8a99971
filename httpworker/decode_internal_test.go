package httpworker

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeDecision: whatever a worker answers, decodeDecision returns a
// decision or an error that says why, and a decision it took encodes
// again (the engine journals it).
func FuzzDecodeDecision(f *testing.F) {
	for _, body := range []string{
		`{"actions":[{"type":"tool.result","result":"It's clear in Tokyo."}]}`,
		`{"actions":[{"type":"tool.error","error":"No forecast.","code":"tool_failed"}]}`,
		`{"agent":{"model":"scripted","tools":[{"name":"t","handler":"client","input":{"type":"object"}}]}}`,
		`{"actions":[{"type":"message.append","message":{"role":"assistant","content":"hi"}},{"type":"model.prompt"}]}`,
		`{"actions":[{"type":"tool.call","id":"c1","name":"t","arguments":"{}","handler":"client","retry":{"attempts":2,"timeout":"5s"}}]}`,
		`{"action":[]}`, `{}`, `[]`, `null`, ``, `{"actions":[{"type":"nope"}]}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := decodeDecision(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("decodeDecision(%q): an error that says nothing", body)
			}
			return
		}
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("decodeDecision(%q) took %+v, which does not encode: %v", body, d, err)
		}
	})
}
