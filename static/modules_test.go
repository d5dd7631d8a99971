package static

import (
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// exportDecl is a declaration a module exports: export function x, class X, const X.
	exportDecl = regexp.MustCompile(`(?m)^export (?:async )?(?:function\*?|class|const|let) +([A-Za-z_$][\w$]*)`)
	// exportList is a list a module exports or re-exports: export { a, b } [from "..."].
	exportList = regexp.MustCompile(`(?m)^export \{([^}]*)\}`)
	// docName is a backticked name in docs/sdk.md; aside is a remark in
	// parentheses, whose names are not exports.
	docName = regexp.MustCompile("`([^`]+)`")
	aside   = regexp.MustCompile(`\([^)]*\)`)
)

// exportsOf are the names module exports.
func exportsOf(t *testing.T, module string) []string {
	t.Helper()
	src, err := fs.ReadFile(FS, module)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range exportDecl.FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	for _, m := range exportList.FindAllStringSubmatch(string(src), -1) {
		for _, part := range strings.Split(m[1], ",") {
			fields := strings.Fields(part) // "a" or "a as b"
			if len(fields) > 0 {
				names = append(names, fields[len(fields)-1])
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestSDKDocModules holds docs/sdk.md's table of the SDK's modules to
// what each module exports: an outside audit found codes.js's row two
// tables short.
func TestSDKDocModules(t *testing.T) {
	doc, err := os.ReadFile("../docs/sdk.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| module | its job | exports |")
	if !ok {
		t.Fatal(`docs/sdk.md has no "| module | its job | exports |" table`)
	}
	rows := 0
	for line := range strings.Lines(strings.TrimPrefix(table, "\n")) {
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if !strings.HasPrefix(line, "|") {
			break
		}
		if len(cells) != 3 || strings.HasPrefix(cells[0], "| ---") {
			continue
		}
		module := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		var documented []string
		for _, m := range docName.FindAllStringSubmatch(aside.ReplaceAllString(strings.TrimSuffix(cells[2], " |"), ""), -1) {
			if name := m[1]; strings.HasSuffix(name, ".js") {
				documented = append(documented, exportsOf(t, name)...) // "the tables of `codes.js`"
			} else {
				documented = append(documented, name)
			}
		}
		slices.Sort(documented)
		if got := exportsOf(t, module); !slices.Equal(documented, got) {
			t.Errorf("docs/sdk.md says %s exports %v; it exports %v", module, documented, got)
		}
		rows++
	}
	if rows == 0 {
		t.Error("docs/sdk.md's table of modules has no rows")
	}
}
