package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// target is a server under test: a child this run started, or -url.
type target struct {
	kind  string // serveGateway or serveEcho
	base  string // http://host:port
	pid   int    // for /proc when the server has no /bench/stats; 0: unknown
	hc    *http.Client
	child *child // nil for -url
}

// child is a server process started with -serve.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan error // Wait's error, once
}

// startTarget starts a fresh server of kind in a child process, or, for the
// gateway with -url, returns the running one.
func startTarget(ctx context.Context, cfg config, kind string, stderr io.Writer) (*target, error) {
	t := &target{kind: kind, hc: &http.Client{Timeout: time.Minute}}
	if kind == serveGateway && cfg.url != "" {
		t.base, t.pid = cfg.url, cfg.pid
		return t, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("failed to find this binary to re-execute: %w", err)
	}
	args := []string{"-serve", kind, "-stdin-lifeline", "-log-level", cfg.logLevel.String(), "-store", cfg.store}
	if kind == serveGateway {
		if cfg.unload > 0 {
			args = append(args, "-unload", cfg.unload.String())
		}
		if cfg.cpuProfile != "" {
			args = append(args, "-cpuprofile", cfg.cpuProfile)
		}
		if cfg.memProfile != "" {
			args = append(args, "-memprofile", cfg.memProfile)
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	ready := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = ready
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the %s server: %w", kind, err)
	}
	c := &child{cmd: cmd, in: in, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.child, t.pid = c, cmd.Process.Pid

	wait := time.NewTimer(30 * time.Second)
	defer wait.Stop()
	select {
	case line := <-ready.line:
		// "serving KIND at URL pid PID"
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "http://") {
				t.base = f
			}
		}
		if t.base == "" {
			t.stop()
			return nil, fmt.Errorf("the %s server said %q, not its URL", kind, line)
		}
		return t, nil
	case err := <-c.done:
		c.done <- err
		return nil, fmt.Errorf("the %s server exited before serving: %v", kind, err)
	case <-wait.C:
		t.stop()
		return nil, fmt.Errorf("the %s server did not start within 30s", kind)
	case <-ctx.Done():
		t.stop()
		return nil, ctx.Err()
	}
}

// stop ends a child: stdin closes, it shuts down gracefully; it is killed
// if it has not exited after 40s (its own shutdown is bounded by 30s).
func (t *target) stop() error {
	t.hc.CloseIdleConnections()
	if t.child == nil {
		return nil
	}
	c := t.child
	t.child = nil
	c.in.Close()
	kill := time.NewTimer(40 * time.Second)
	defer kill.Stop()
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("the %s server failed: %w", t.kind, err)
		}
		return nil
	case <-kill.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("the %s server did not exit within 40s of its stdin closing: killed", t.kind)
	}
}

// stats reads the server's memory and CPU. With settle, the server first
// collects garbage and returns free pages to the OS. A server without
// /bench/stats gives only RSS, from /proc/PID/status, when its pid is known.
func (t *target) stats(ctx context.Context, settle bool) (procStats, error) {
	u := t.base + "/bench/stats"
	if settle {
		u += "?settle=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return procStats{}, err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return procStats{}, fmt.Errorf("failed to read the %s server's stats: %w", t.kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && t.pid > 0 {
		var st procStats
		st.PID = t.pid
		st.RSS, st.HWM, err = readProcStatus(strconv.Itoa(t.pid))
		return st, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return procStats{}, fmt.Errorf("the %s server has no /bench/stats: give its -pid to read /proc/PID/status", t.kind)
	}
	if resp.StatusCode != http.StatusOK {
		return procStats{}, fmt.Errorf("the %s server's stats: %s", t.kind, resp.Status)
	}
	var st procStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("failed to decode the %s server's stats: %w", t.kind, err)
	}
	return st, nil
}

// control posts to one of the server's /bench/ endpoints.
func (t *target) control(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("failed to post %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// connections asks the gateway's /healthz how many sockets it holds.
func (t *target) connections(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/healthz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Connections int `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("failed to decode /healthz: %w", err)
	}
	return h.Connections, nil
}

// waitConnections waits until the gateway holds n sockets, for up to 30s.
func (t *target) waitConnections(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		got, err := t.connections(ctx)
		if err == nil && got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the gateway holds %d connections, want %d: %w", got, n, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// firstLine is a child's stdout: it hands over the first line and discards
// the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- string(w.buf[:i])
		w.sent, w.buf = true, nil
	}
	return len(p), nil
}
