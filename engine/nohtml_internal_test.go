package engine

import (
	"bytes"
	"encoding/json"
)

// marshalNoHTML is encoding/json's Marshal, by reflection, with HTML's
// characters as they are: what the hand-written encoders are held to.
func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
