package scripted

import (
	_ "embed"
)

//go:embed demo.json
var demoJSON []byte

// Demo returns the demo script, the gateway's default when no --script is
// given. Each call decodes a fresh copy, so callers may edit theirs (tests
// zero the delays) without touching anyone else's.
func Demo() Script {
	s, err := decode(demoJSON)
	if err != nil {
		// The demo is compiled into the binary; its tests keep it valid.
		panic("scripted: embedded demo.json: " + err.Error())
	}
	return s
}
