package static

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func TestFSHasTheAssets(t *testing.T) {
	for _, name := range []string{
		"gateway.js", "connection.js", "store.js", "outbox.js", "cards.js", "runner.js", "codes.js",
		"chat.js", "composer.js", "follow.js", "announce.js", "status.js", "toolcard.js", "markdown.js", "mdfragment.js", "errors.js", "dom.js", "history.js", "welcome.js", "demo.js", "app.css", "favicon.svg",
		"vendor/marked.js", "vendor/purify.js", "vendor/marked.LICENSE", "vendor/dompurify.LICENSE",
	} {
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Errorf("FS lacks %s: %v", name, err)
			continue
		}
		if len(b) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	if _, err := fs.Stat(FS, "static.go"); err == nil {
		t.Error("FS embeds static.go; only browser files belong in it")
	}
}

// Every relative import of every module must be a file in FS, or the page
// breaks with nothing but a console error.
func TestRelativeImportsResolve(t *testing.T) {
	importRE := regexp.MustCompile(`(?m)^\s*import\s[^"']*["'](\./[^"']+)["']`)
	mods, err := fs.Glob(FS, "*.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		b, _ := fs.ReadFile(FS, m)
		for _, match := range importRE.FindAllStringSubmatch(string(b), -1) {
			target := strings.TrimPrefix(match[1], "./")
			if _, err := fs.Stat(FS, target); err != nil {
				t.Errorf("%s imports %s, which FS lacks", m, match[1])
			}
		}
	}
}

func TestVersion(t *testing.T) {
	v := Version()
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(v) {
		t.Fatalf("Version() = %q, want 12 hex digits", v)
	}
	if Version() != v {
		t.Fatal("Version() changed between calls")
	}
}

// TestModulesAreSmall: each SDK module keeps to one job, under 400 lines.
func TestModulesAreSmall(t *testing.T) {
	names, err := fs.Glob(FS, "*.js")
	if err != nil || len(names) == 0 {
		t.Fatalf("no modules: %v", err)
	}
	for _, name := range names {
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n >= 400 {
			t.Errorf("%s has %d lines: split it by job (docs/sdk.md lists the modules)", name, n)
		}
	}
}
