package static

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// jsTables reads codes.js: each `export const NAME = Object.freeze({...});`
// as its KEY: value lines, in order.
func jsTables(t *testing.T) map[string][][2]string {
	t.Helper()
	src, err := fs.ReadFile(FS, "codes.js")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][][2]string{}
	block := regexp.MustCompile(`(?s)export const ([A-Z_]+) = Object\.freeze\(\{(.*?)\}\);`)
	entry := regexp.MustCompile(`(?m)^\s*([A-Z_]+):\s*("[a-z_]+"|\d+),`)
	for _, m := range block.FindAllStringSubmatch(string(src), -1) {
		for _, e := range entry.FindAllStringSubmatch(m[2], -1) {
			tables[m[1]] = append(tables[m[1]], [2]string{e[1], strings.Trim(e[2], `"`)})
		}
	}
	return tables
}

func goTable[T comparable](codes []engine.Code[T]) [][2]string {
	out := make([][2]string, len(codes))
	for i, c := range codes {
		out[i] = [2]string{c.Name, fmt.Sprint(c.Value)}
	}
	return out
}

// TestCodesMatchTheGateway: the SDK's copy of the wire codes is the Go
// table, name for name and value for value.
func TestCodesMatchTheGateway(t *testing.T) {
	js := jsTables(t)
	want := map[string][][2]string{
		"CLOSE":         goTable(engine.Closes),
		"FRAME_ERROR":   goTable(engine.FrameErrors),
		"SESSION_ERROR": goTable(engine.SessionErrors),
		"TOOL_ERROR":    goTable(engine.ToolErrors),
		"CANCEL_REASON": goTable(engine.CancelReasons),
		"STOP_REASON":   goTable(engine.StopReasons),
		"GUARD":         goTable(engine.Guards),
	}
	if len(js) != len(want) {
		t.Errorf("codes.js has tables %v, want %d", keys(js), len(want))
	}
	for name, w := range want {
		if got := js[name]; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("codes.js %s =\n%v\nengine/codes.go has\n%v", name, got, w)
		}
	}
}

// TestCodesAreDocumented: docs/protocol.md lists every wire code, and no
// code the gateway does not send.
func TestCodesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	section := func(heading string) string {
		s := string(doc)
		i := strings.Index(s, heading)
		if i < 0 {
			t.Fatalf("docs/protocol.md has no %q", heading)
		}
		s = s[i+len(heading):]
		if j := strings.Index(s, "\n#"); j >= 0 {
			s = s[:j]
		}
		return s
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_0-9]+)` \\|")
	check := func(heading string, want []string) {
		var got []string
		for _, m := range rows.FindAllStringSubmatch(section(heading), -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("docs/protocol.md %q lists %v, want %v", heading, got, want)
		}
	}
	values := func(table [][2]string) []string {
		var out []string
		for _, e := range table {
			out = append(out, e[1])
		}
		return out
	}
	check("### Error frames", values(goTable(engine.FrameErrors)))
	check("### Session errors", values(goTable(engine.SessionErrors)))
	check("### Tool errors", values(goTable(engine.ToolErrors)))
	check("### Guards", values(goTable(engine.Guards)))
	check("### Stop reasons", values(goTable(engine.StopReasons)))
	check("### Cancel reasons", values(goTable(engine.CancelReasons)))
	closes := values(goTable(engine.Closes))
	for i, c := range closes {
		if _, err := strconv.Atoi(c); err != nil {
			t.Fatalf("close code %d is %q", i, c)
		}
	}
	check("### Close codes", closes)
}

// TestSDKDocListsTheCodes: docs/sdk.md's table of the SDK's code tables
// names every code of each, in the tables' order (CLOSE by its names).
func TestSDKDocListsTheCodes(t *testing.T) {
	doc, err := os.ReadFile("../docs/sdk.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][][2]string{
		"CLOSE":         goTable(engine.Closes),
		"FRAME_ERROR":   goTable(engine.FrameErrors),
		"SESSION_ERROR": goTable(engine.SessionErrors),
		"TOOL_ERROR":    goTable(engine.ToolErrors),
		"CANCEL_REASON": goTable(engine.CancelReasons),
		"STOP_REASON":   goTable(engine.StopReasons),
		"GUARD":         goTable(engine.Guards),
	}
	token := regexp.MustCompile("`([A-Za-z_0-9]+)`")
	for name, table := range tables {
		row := regexp.MustCompile("(?m)^\\| `" + name + "` \\|.*\\| (.*) \\|$").FindStringSubmatch(string(doc))
		if row == nil {
			t.Errorf("docs/sdk.md has no row for %s", name)
			continue
		}
		var got, want []string
		for _, m := range token.FindAllStringSubmatch(row[1], -1) {
			got = append(got, m[1])
		}
		for _, e := range table {
			if name == "CLOSE" {
				want = append(want, e[0])
			} else {
				want = append(want, e[1])
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("docs/sdk.md's %s row lists\n%v\nwant\n%v", name, got, want)
		}
	}
}

func keys(m map[string][][2]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
