package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The harness prints the useChat-equivalent client's line first and the
// raw client's last; the raw one is the peer's figure.
func TestParsePeerLine(t *testing.T) {
	out := "conc  metric ...\n" +
		"aisdk client-tool roundtrip (useChat-equivalent client): median_us=5345 p99_us=15376 rps_seq=94.9 rps_c16=167.4 p90_us=8793\n" +
		"aisdk client-tool roundtrip: median_us=2254 p99_us=6744 rps_seq=228 rps_c16=339.8 p90_us=3255 node=v22.23.5 ai=7.0.173\n"
	got, err := parsePeerLine(out)
	if err != nil {
		t.Fatal(err)
	}
	if got.median != 2254*time.Microsecond || got.p99 != 6744*time.Microsecond || got.rpsSeq != 228 || got.rpsC16 != 339.8 {
		t.Errorf("parsed %+v, want median 2254µs, p99 6744µs, 228 and 339.8 round trips/s", got)
	}
}

func TestParsePeerLineRefusesOtherOutput(t *testing.T) {
	for _, out := range []string{
		"",
		"aisdk client-tool roundtrip (useChat-equivalent client): median_us=5345 p99_us=15376 rps_seq=94.9 rps_c16=167.4\n",
		"aisdk client-tool roundtrip: median_us=fast p99_us=6744 rps_seq=228 rps_c16=339.8\n",
		"aisdk client-tool roundtrip: median_us=2254 p99_us=6744 rps_seq=228\n",
	} {
		if got, err := parsePeerLine(out); err == nil {
			t.Errorf("parsePeerLine(%q) = %+v, want an error", out, got)
		}
	}
}

func TestPerStore(t *testing.T) {
	if got := perStore("bin/gateway-cpu.prof", "jetstream"); got != "bin/gateway-cpu-jetstream.prof" {
		t.Errorf("perStore = %q", got)
	}
	if got := perStore("", "jetstream"); got != "" {
		t.Errorf("perStore of no file = %q, want none", got)
	}
}
