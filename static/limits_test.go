package static_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/static"
)

// TestDefaultLimitsAreTheGateways: the SDK's DEFAULT_LIMITS, which it
// holds messages to until session.opened says the gateway's own, are the
// gateway's defaults (--read-limit, --max-message).
func TestDefaultLimitsAreTheGateways(t *testing.T) {
	src, err := fs.ReadFile(static.FS, "connection.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`DEFAULT_LIMITS = Object\.freeze\(\{ frameBytes: ([^,]+), messageBytes: ([^}]+?) \}\)`).FindStringSubmatch(string(src))
	if m == nil {
		t.Fatal("connection.js has no DEFAULT_LIMITS as this test reads it")
	}
	for _, c := range []struct {
		name, js string
		want     int
	}{
		{"frameBytes", m[1], gateway.DefaultReadLimit},
		{"messageBytes", m[2], engine.DefaultMaxMessageBytes},
	} {
		if got := jsInt(t, c.js); got != c.want {
			t.Errorf("DEFAULT_LIMITS.%s = %s (%d), the gateway's default %d", c.name, c.js, got, c.want)
		}
	}
}

// jsInt reads a JavaScript integer written as digits or "a << b".
func jsInt(t *testing.T, s string) int {
	t.Helper()
	if m := regexp.MustCompile(`^(\d+) << (\d+)$`).FindStringSubmatch(s); m != nil {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		return a << b
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is no integer this test reads", s)
	}
	return n
}
