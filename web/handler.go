package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Handler serves [ChatPage] for p, rendered once (the page is a function of
// p alone), under a Content-Security-Policy that lets it run its own
// scripts and nothing else: the modules under /static/ and its import map
// (by the map's hash), a socket and requests to its own origin (and to
// p.SocketPath's, when that names another), no plugins, no other site's
// frame. It is the sanitizer's second line: a model's text reaches the page
// as Markdown that DOMPurify cleans, and a way past it (a bug of its, a
// tool card's innerHTML in a page of one's own) would run beside the
// user's chats. A page that loads more (an analytics script, a font from
// another site) serves ChatPage under a policy of its own.
func Handler(p PageProps) (http.Handler, error) {
	var page bytes.Buffer
	if err := ChatPage(p).Render(context.Background(), &page); err != nil {
		return nil, fmt.Errorf("failed to render the chat page: %w", err)
	}
	policy, err := pagePolicy(page.Bytes(), p.SocketPath)
	if err != nil {
		return nil, err
	}
	body := page.Bytes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", policy)
		_, _ = w.Write(body)
	}), nil
}

// inlineScript finds the page's inline scripts: their text, as the
// browser hashes it, is submatch 1.
var inlineScript = regexp.MustCompile(`(?s)<script(?:\s[^>]*)?>(.*?)</script>`)

// pagePolicy is the Content-Security-Policy of page, a rendered ChatPage:
// each of its inline scripts (the import map) allowed by its hash.
func pagePolicy(page []byte, socket string) (string, error) {
	scripts := []string{"'self'"}
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		if len(bytes.TrimSpace(m[1])) == 0 {
			continue // a script loaded from its src
		}
		sum := sha256.Sum256(m[1])
		scripts = append(scripts, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	connect := []string{"'self'"}
	if u, err := url.Parse(socket); err != nil {
		return "", fmt.Errorf("the chat page's SocketPath %q: %w", socket, err)
	} else if u.Host != "" {
		connect = append(connect, u.Scheme+"://"+u.Host)
	}
	return strings.Join([]string{
		"default-src 'self'",
		"script-src " + strings.Join(scripts, " "),
		"connect-src " + strings.Join(connect, " "),
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'self'",
	}, "; "), nil
}
