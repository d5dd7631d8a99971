//go:build !unix

package jetstream

// lockDataDir does nothing where flock does not exist: run one gateway per
// data directory.
func lockDataDir(string) (func(), error) { return func() {}, nil }
