package metrics_test

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestMetricsAreDocumented: every metric the gateway registers is in
// operations.md's table, and the table names no metric the gateway lacks:
// an operator builds alerts from that page.
func TestMetricsAreDocumented(t *testing.T) {
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := func(re string, text []byte) []string {
		var out []string
		for _, m := range regexp.MustCompile(re).FindAllSubmatch(text, -1) {
			out = append(out, string(m[1]))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	registered := names(`Name: "(gateway_[a-z_]+)"`, src)
	documented := names("(?m)^\\| `(gateway_[a-z_]+)` \\|", doc)
	if len(registered) < 20 {
		t.Fatalf("found %d metrics in metrics.go, want the gateway's: %v", len(registered), registered)
	}
	for _, name := range registered {
		if !slices.Contains(documented, name) {
			t.Errorf("%s is registered but not in operations.md's table", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(registered, name) {
			t.Errorf("operations.md's table has %s, which the gateway does not register", name)
		}
	}
}
