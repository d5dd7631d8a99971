package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flagHelp is what `gateway -h` says of one flag: its default as the
// usage prints it ("" when none) and the variable it names.
type flagHelp struct {
	def, env string
}

// helpFlags parses the usage text of `gateway -h`, with no variable set:
// the flags as an operator reads them.
func helpFlags(t *testing.T) map[string]flagHelp {
	t.Helper()
	var usage strings.Builder
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseConfig(-h) = %v, want flag.ErrHelp", err)
	}
	name := regexp.MustCompile(`^  -([a-z-]+)`)
	def := regexp.MustCompile(`\(default "?([^")]*)"?\)$`)
	env := regexp.MustCompile(`env ([A-Z_]+)`)
	flags := map[string]flagHelp{}
	current := ""
	for line := range strings.SplitSeq(usage.String(), "\n") {
		if m := name.FindStringSubmatch(line); m != nil {
			current = m[1]
			flags[current] = flagHelp{}
			continue
		}
		if current == "" {
			continue
		}
		h := flags[current]
		if m := def.FindStringSubmatch(line); m != nil {
			h.def = m[1]
		}
		if m := env.FindStringSubmatch(line); m != nil && h.env == "" {
			h.env = m[1]
		}
		flags[current] = h
	}
	if len(flags) < 30 {
		t.Fatalf("read %d flags from the usage: the parse is broken\n%s", len(flags), usage.String())
	}
	return flags
}

// TestFlagTablesMatchTheBinary: every flag of the binary is in a table of
// docs/*.md, and every table row that names flags names flags the binary
// has, with the variable each reads, and the default a "default" column
// gives is the binary's. An operator reads the
// docs, not run.go: a default changed in one place only is caught here.
func TestFlagTablesMatchTheBinary(t *testing.T) {
	flags := helpFlags(t)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("docs: %v", err)
	}
	quoted := regexp.MustCompile("`([^`]*)`")
	// A default cell: `v` alone or followed by ":" or " (", a bare number,
	// or none. Anything else (a path that depends on the machine) is prose.
	plain := regexp.MustCompile("^(?:`([^`]*)`|(-?[0-9]+)|(none))(?:$|:| \\()")
	rows, compared := 0, 0
	tabled := map[string]bool{}
	for _, path := range docs {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defaultColumn := -1
		for line := range strings.SplitSeq(string(text), "\n") {
			if !strings.HasPrefix(line, "|") {
				defaultColumn = -1
				continue
			}
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			if cells[0] == "flag" { // a table's header: which column gives the default
				defaultColumn = -1
				for i, c := range cells {
					if strings.HasPrefix(c, "default") {
						defaultColumn = i
					}
				}
				continue
			}
			if !strings.HasPrefix(cells[0], "`--") || len(cells) < 3 {
				continue
			}
			rows++
			var names, envs []string
			for _, m := range quoted.FindAllStringSubmatch(cells[0], -1) {
				names = append(names, strings.TrimPrefix(m[1], "--"))
			}
			for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
				envs = append(envs, m[1])
			}
			where := filepath.Base(path) + ": " + cells[0]
			for _, name := range names {
				tabled[name] = true
				h, ok := flags[name]
				if !ok {
					t.Errorf("%s: the binary has no flag --%s", where, name)
					continue
				}
				if h.env != "" && !strings.Contains(strings.Join(envs, " "), h.env) {
					t.Errorf("%s: the row names %v; --%s reads %s", where, envs, name, h.env)
				}
			}
			if defaultColumn < 0 || defaultColumn >= len(cells) || len(names) != 1 {
				continue
			}
			m := plain.FindStringSubmatch(cells[defaultColumn])
			if m == nil {
				continue
			}
			documented := m[1] + m[2] // "none": no default
			if got := flags[names[0]].def; !sameDefault(documented, got) {
				t.Errorf("%s: the docs give the default %q, the binary %q", where, documented, got)
			}
			compared++
		}
	}
	if rows < 30 || compared < 25 {
		t.Errorf("read %d rows of flags and compared %d defaults: the docs' tables are not where this test looks", rows, compared)
	}
	for name := range flags {
		if !tabled[name] {
			t.Errorf("--%s is in no flag table of docs/ (deploy.md has every gateway's)", name)
		}
	}
}

// sameDefault compares a documented default with the usage's: durations
// by value (720h is 720h0m0s).
func sameDefault(documented, usage string) bool {
	if documented == usage {
		return true
	}
	d1, err1 := time.ParseDuration(documented)
	d2, err2 := time.ParseDuration(usage)
	return err1 == nil && err2 == nil && d1 == d2
}
