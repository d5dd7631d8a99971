package web

import (
	"net/url"
	"strings"
)

// PageProps configures [ChatPage]. The zero value is a working page.
type PageProps struct {
	// Title is the page's title and heading; empty means "Client tools gateway".
	Title string
	// AssetVersion is added to every /static/ URL as ?v=AssetVersion (and
	// to the import map, so modules that import each other get it too), so a
	// browser fetches new files after a deploy and may cache them forever
	// otherwise. Empty means plain URLs: fine in development, but caches may
	// then serve stale files. static.Version() is a good value.
	AssetVersion string
	// SocketPath is the WebSocket endpoint the page connects to; empty means
	// Base + "/ws".
	SocketPath string
	// Base is the path the gateway's handler is mounted under, with no
	// trailing slash ("/chat", for http.StripPrefix("/chat", ...)): the
	// page loads its files from Base + "/static/", lists the chats at
	// Base + "/sessions" and connects to Base + "/ws". Empty: the root.
	Base string
}

// DefaultTitle is the title of a page whose PageProps.Title is empty.
const DefaultTitle = "Client tools gateway"

func (p PageProps) title() string {
	if strings.TrimSpace(p.Title) == "" {
		return DefaultTitle
	}
	return p.Title
}

func (p PageProps) socket() string {
	if p.SocketPath == "" {
		return p.base() + "/ws"
	}
	return p.SocketPath
}

// sessions is the URL of the list of chats.
func (p PageProps) sessions() string { return p.base() + "/sessions" }

func (p PageProps) base() string { return strings.TrimRight(p.Base, "/") }

// asset is the URL of a file under /static/, versioned.
func (p PageProps) asset(name string) string {
	u := p.base() + "/static/" + name
	if p.AssetVersion != "" {
		u += "?v=" + url.QueryEscape(p.AssetVersion)
	}
	return u
}

// importMap maps the SDK's modules to their versioned URLs, so that
// `import "./gateway.js"` in a versioned module loads the same version. It is
// nil without an AssetVersion.
func (p PageProps) importMap() map[string]map[string]string {
	if p.AssetVersion == "" {
		return nil
	}
	imports := map[string]string{}
	for _, m := range modules {
		imports[p.base()+"/static/"+m] = p.asset(m)
	}
	return map[string]map[string]string{"imports": imports}
}

// modules are the ES modules under /static/ that import each other: every
// *.js file of package static, vendor/ included (TestImportMapHasEveryModule
// holds them to it).
var modules = []string{
	"gateway.js", "connection.js", "store.js", "outbox.js", "cards.js", "events.js", "runner.js", "codes.js", // the SDK
	"chat.js", "reply.js", "composer.js", "follow.js", "announce.js", "status.js", "toolcard.js", "markdown.js", "mdfragment.js", "errors.js", "dom.js", "history.js", "welcome.js", "demo.js", // the chat page
	"vendor/marked.js", "vendor/purify.js", // third-party, copied by make vendor
}
