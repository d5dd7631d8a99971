package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// markerFile says a directory is the gateway's data directory, and in which
// format. Open refuses a non-empty directory without it: pointing the
// gateway at the wrong directory must not scribble over someone's files.
const markerFile = "gateway-data.json"

const dataFormat = 1

type marker struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	Note    string    `json:"note"`
}

// embedded is a NATS server with JetStream and no listening port, in this
// process.
type embedded struct {
	ns     *server.Server
	unlock func()
}

// checkDataDir makes dir the gateway's data directory, or says why it
// cannot be.
func checkDataDir(dir string) error {
	if dir == "" {
		return errors.New("no data directory: give --data-dir, or --store memory")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("failed to create the data directory: %w", err)
		}
	case err != nil:
		return fmt.Errorf("failed to read the data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && len(entries) > 0:
		return fmt.Errorf("%s is not a gateway data directory: it holds other files and no %s. Give --data-dir an empty or new directory, or the one the gateway made", dir, markerFile)
	case errors.Is(err, fs.ErrNotExist):
		m, _ := json.MarshalIndent(marker{Format: dataFormat, Created: time.Now().UTC(),
			Note: "The client-tools gateway's sessions (NATS JetStream files under jetstream/). Back up the whole directory while the gateway is stopped."}, "", "  ")
		if err := os.WriteFile(path, append(m, '\n'), 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to read %s: %w", path, err)
	}
	var m marker
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s is damaged (%v): if this is the gateway's data directory, restore it from a backup; otherwise give --data-dir another directory", path, err)
	}
	if m.Format != dataFormat {
		return fmt.Errorf("%s is in data format %d, and this gateway reads format %d: use the gateway version that wrote it", dir, m.Format, dataFormat)
	}
	return nil
}

// startEmbedded starts the server with its files in dataDir/jetstream.
func startEmbedded(dataDir string) (*embedded, error) {
	if err := checkDataDir(dataDir); err != nil {
		return nil, err
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			unlock()
		}
	}()
	ns, err := server.NewServer(&server.Options{
		ServerName: "gateway",
		DontListen: true,
		JetStream:  true,
		StoreDir:   filepath.Join(dataDir, "jetstream"),
		MaxPayload: MaxBatch,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the embedded NATS server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server did not start with its data in %s", dataDir)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server could not enable JetStream in %s (is it writable, and is another gateway using it?)", dataDir)
	}
	started = true
	return &embedded{ns: ns, unlock: unlock}, nil
}

func (e *embedded) stop() {
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	e.unlock()
}
