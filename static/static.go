package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sync"
)

// FS holds the files at its root: FS.Open("gateway.js"). Serve it with
// http.StripPrefix("/static/", http.FileServerFS(static.FS)). It is
// read-only and safe for concurrent use.
//
//go:embed *.js *.css *.svg vendor
var FS embed.FS

// Version is a short hash of every file in FS: it changes when any of them
// does, so web.PageProps{AssetVersion: static.Version()} busts caches
// exactly when needed.
var Version = sync.OnceValue(func() string {
	h := sha256.New()
	// WalkDir visits in lexical order, so the hash is stable.
	_ = fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := FS.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
})
