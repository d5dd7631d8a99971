package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// peerResult is the last line of the AI SDK harness (../shared/peers/aisdk):
// `aisdk client-tool roundtrip: median_us=… p99_us=… rps_seq=… rps_c16=…`.
type peerResult struct {
	median, p99    time.Duration
	rpsSeq, rpsC16 float64
	line           string
}

// peerPrefix starts the harness's summary line for its raw client.
const peerPrefix = "aisdk client-tool roundtrip:"

// runPeerAISDK copies the harness at dir (it may be read-only) to a new
// temporary folder, runs ./run.sh there and parses its last line. It
// returns errPeerAbsent when dir does not hold the harness.
func runPeerAISDK(ctx context.Context, dir string, stderr io.Writer) (peerResult, error) {
	if _, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil {
		return peerResult{}, errPeerAbsent
	}
	tmp, err := os.MkdirTemp("", "gatewaybench-aisdk-")
	if err != nil {
		return peerResult{}, err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(dir, tmp); err != nil {
		return peerResult{}, fmt.Errorf("failed to copy the harness: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./run.sh")
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("%s/run.sh failed: %w", tmp, err)
	}
	return parsePeerLine(out.String())
}

var errPeerAbsent = errors.New("harness not present")

// parsePeerLine finds the raw client's summary line in the harness's output
// (its last line) and reads its fields.
func parsePeerLine(out string) (peerResult, error) {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, peerPrefix) {
			line = l
		}
	}
	if line == "" {
		return peerResult{}, fmt.Errorf("no line starting %q in the harness's output", peerPrefix)
	}
	r := peerResult{line: line}
	fields := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(line, peerPrefix)) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	num := func(k string) (float64, error) {
		v, err := strconv.ParseFloat(fields[k], 64)
		if err != nil {
			return 0, fmt.Errorf("harness line %q: field %s: %w", line, k, err)
		}
		return v, nil
	}
	var errs []error
	us := func(k string) time.Duration {
		v, err := num(k)
		errs = append(errs, err)
		return time.Duration(v * float64(time.Microsecond))
	}
	r.median, r.p99 = us("median_us"), us("p99_us")
	var err error
	r.rpsSeq, err = num("rps_seq")
	errs = append(errs, err)
	r.rpsC16, err = num("rps_c16")
	errs = append(errs, err)
	return r, errors.Join(errs...)
}

// copyTree copies the regular files and folders under src into dst, each
// writable by its owner, skipping node_modules (run.sh installs it).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm()|0o200)
	})
}
