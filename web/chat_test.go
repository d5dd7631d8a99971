package web

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/clienttools/gateway/static"
)

func render(t *testing.T, p PageProps) string {
	t.Helper()
	var b strings.Builder
	if err := ChatPage(p).Render(context.Background(), &b); err != nil {
		t.Fatalf("Render: %v", err)
	}
	return b.String()
}

func TestChatPageTestIDs(t *testing.T) {
	html := render(t, PageProps{})
	// chat.js and the Playwright specs rely on these; docs/ui.md lists them.
	for _, id := range []string{
		"connection-status", "new-chat", "messages", "composer", "prompt", "send", "stop",
		"message", "message-role", "message-text", "notice", "notice-text",
		"message-list", "message-queued", "thinking", "retry",
		"tool-card", "tool-name", "tool-handler", "tool-status", "tool-attempt", "tool-time", "tool-args",
		"tool-input", "tool-attempts", "tool-where", "tool-slot", "tool-result", "tool-error", "tool-transcript",
		"confirm", "confirm-question", "confirm-approve", "confirm-deny", "confirm-answer",
		"history", "history-list", "history-empty", "history-item", "empty-chat", "suggestions", "suggestion",
	} {
		if !strings.Contains(html, `data-testid="`+id+`"`) {
			t.Errorf("page has no data-testid=%q", id)
		}
	}
	for _, tpl := range []string{"tpl-message", "tpl-notice", "tpl-tool-card", "tpl-confirm", "tpl-history-item", "tpl-suggestion"} {
		if !strings.Contains(html, `<template id="`+tpl+`">`) {
			t.Errorf("page has no <template id=%q>", tpl)
		}
	}
}

func TestChatPageProps(t *testing.T) {
	tests := []struct {
		name string
		p    PageProps
		want []string
		not  []string
	}{
		{
			name: "zero value",
			p:    PageProps{},
			want: []string{
				"<title>" + DefaultTitle + "</title>",
				`src="/static/demo.js"`, `href="/static/app.css"`, `data-socket="/ws"`,
			},
			not: []string{"?v=", "importmap"},
		},
		{
			name: "versioned",
			p:    PageProps{Title: "Support", AssetVersion: "abc 1", SocketPath: "/chat/ws"},
			want: []string{
				"<title>Support</title>", `src="/static/demo.js?v=abc+1"`, `href="/static/app.css?v=abc+1"`,
				`type="importmap"`, `"/static/gateway.js":"/static/gateway.js?v=abc+1"`, `data-socket="/chat/ws"`,
			},
		},
		{
			name: "under a prefix",
			p:    PageProps{AssetVersion: "1", Base: "/chat/"},
			want: []string{
				`src="/chat/static/demo.js?v=1"`, `href="/chat/static/app.css?v=1"`, `"/chat/static/gateway.js":"/chat/static/gateway.js?v=1"`,
				`data-socket="/chat/ws"`, `data-sessions="/chat/sessions"`,
			},
			not: []string{`"/static/`},
		},
		{
			name: "title is escaped",
			p:    PageProps{Title: `<script>alert(1)</script>`},
			want: []string{"&lt;script&gt;alert(1)&lt;/script&gt;"},
			not:  []string{"<script>alert(1)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html := render(t, tt.p)
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("page lacks %s", w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(html, n) {
					t.Errorf("page contains %s", n)
				}
			}
		})
	}
}

func TestImportMapComesBeforeModules(t *testing.T) {
	html := render(t, PageProps{AssetVersion: "1"})
	im, mod := strings.Index(html, `type="importmap"`), strings.Index(html, `type="module"`)
	if im < 0 || mod < 0 || im > mod {
		t.Fatalf("import map at %d, first module at %d: the map must come first", im, mod)
	}
}

// A module missing from the import map loads unversioned: after a deploy a
// browser could run a cached old copy of it next to new ones.
func TestImportMapHasEveryModule(t *testing.T) {
	files, err := fs.Glob(static.FS, "*.js")
	if err != nil {
		t.Fatal(err)
	}
	vendored, err := fs.Glob(static.FS, "vendor/*.js")
	if err != nil || len(vendored) == 0 {
		t.Fatalf("static.FS has no vendor/*.js: %v", err)
	}
	files = append(files, vendored...)
	slices.Sort(files)
	got := slices.Clone(modules)
	slices.Sort(got)
	if !slices.Equal(got, files) {
		t.Errorf("modules = %v, want every *.js of static.FS: %v", got, files)
	}
	html := render(t, PageProps{AssetVersion: "1"})
	for _, m := range files {
		if !strings.Contains(html, `"/static/`+m+`":"/static/`+m+`?v=1"`) {
			t.Errorf("the import map lacks %s", m)
		}
		if m != "demo.js" && !strings.Contains(html, `<link rel="modulepreload" href="/static/`+m+`?v=1">`) {
			t.Errorf("the page does not preload %s", m)
		}
	}
}
