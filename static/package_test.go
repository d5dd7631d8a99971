package static

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The npm package (package.json) is the files the gateway serves: every
// JavaScript file it exports or lists is in FS, its declarations are on
// disk beside them, and package.json and the declarations themselves are
// not served.
func TestPackageIsTheServedFiles(t *testing.T) {
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Name    string
		Type    string
		Types   string
		Exports map[string]json.RawMessage
		Files   []string
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if pkg.Type != "module" {
		t.Errorf("package.json type = %q, want module", pkg.Type)
	}
	checkJS := func(what, p string) {
		p = strings.TrimPrefix(p, "./")
		if _, err := fs.Stat(FS, p); err != nil {
			t.Errorf("%s: %s is not served (not in FS)", what, p)
		}
	}
	checkDTS := func(what, p string) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	checkDTS("types", pkg.Types)
	if len(pkg.Exports) == 0 {
		t.Fatal("package.json has no exports")
	}
	for sub, raw := range pkg.Exports {
		if sub == "./package.json" {
			continue
		}
		var cond struct{ Types, Default string }
		if err := json.Unmarshal(raw, &cond); err != nil || cond.Types == "" || cond.Default == "" {
			t.Errorf("exports %q: want {types, default}, got %s", sub, raw)
			continue
		}
		checkJS("exports "+sub, cond.Default)
		checkDTS("exports "+sub, cond.Types)
	}
	for _, f := range pkg.Files {
		if strings.HasSuffix(f, ".d.ts") {
			checkDTS("files", f)
		} else {
			checkJS("files", f)
		}
	}
	// What the listed modules import is listed too: a file left out
	// breaks the package's import.
	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^;]*?["'](\./[^"']+)["']`)
	for _, f := range pkg.Files {
		if !strings.HasSuffix(f, ".js") {
			continue
		}
		src, err := fs.ReadFile(FS, f)
		if err != nil {
			continue // reported above
		}
		for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
			if dep := strings.TrimPrefix(m[1], "./"); !slices.Contains(pkg.Files, dep) {
				t.Errorf("files: %s imports %s, which package.json does not list", f, dep)
			}
		}
	}
	for _, name := range []string{"package.json", "types"} {
		if _, err := fs.Stat(FS, name); err == nil {
			t.Errorf("FS embeds %s; the gateway serves only the browser's files", name)
		}
	}
}

// TestDeclaredCodes: types/codes.d.ts declares every table of codes.js,
// key for key and value for value, in the same order.
func TestDeclaredCodes(t *testing.T) {
	src, err := os.ReadFile("types/codes.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string][][2]string{}
	block := regexp.MustCompile(`(?s)export declare const ([A-Z_]+): Readonly<\{(.*?)\}>;`)
	entry := regexp.MustCompile(`(?m)^\s*([A-Z_]+):\s*("[a-z_]+"|\d+);`)
	for _, m := range block.FindAllStringSubmatch(string(src), -1) {
		for _, e := range entry.FindAllStringSubmatch(m[2], -1) {
			declared[m[1]] = append(declared[m[1]], [2]string{e[1], strings.Trim(e[2], `"`)})
		}
	}
	js := jsTables(t)
	if d, j := slices.Sorted(maps.Keys(declared)), slices.Sorted(maps.Keys(js)); !slices.Equal(d, j) {
		t.Errorf("types/codes.d.ts declares tables %v; codes.js has %v", d, j)
	}
	for name, want := range js {
		if got := declared[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("types/codes.d.ts %s =\n%v\ncodes.js has\n%v", name, got, want)
		}
	}
}
