package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/anthropic"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/httpworker"
	"github.com/clienttools/gateway/store/jetstream"
)

func TestParseConfig(t *testing.T) {
	defaults := config{
		listen:            "127.0.0.1:8080",
		model:             "scripted",
		clientTimeout:     engine.DefaultClientTimeout,
		workerTimeout:     engine.DefaultWorkerTimeout,
		workerMaxInFlight: httpworker.DefaultMaxInFlight,
		workerMaxResponse: httpworker.DefaultMaxResponseBytes,
		readLimit:         1 << 20,
		maxMessage:        engine.DefaultMaxMessageBytes,
		limits:            engine.DefaultLimits,
		maxSockets:        gateway.DefaultMaxSockets,
		maxNew:            gateway.DefaultNewSessionsPerMinute,
		maxLive:           engine.DefaultMaxLiveSessions,
		maxDepth:          engine.DefaultMaxDepth,
		maxFanOut:         engine.DefaultMaxFanOut,
		pingInterval:      gateway.DefaultPingInterval,
		modelIdle:         anthropic.DefaultStreamIdleTimeout,
		store:             "jetstream",
		dataDir:           "gateway-data", // no HOME in the tests' environment
		natsReplicas:      1,
		fsync:             jetstream.DefaultSync,
		retain:            engine.DefaultRetain,
		unload:            engine.DefaultUnload,
		replayMemory:      engine.DefaultReplayBytes,
		leaseTTL:          jetstream.DefaultLeaseTTL,
		logLevel:          slog.LevelInfo,
		pageTools:         true,
		sameSite:          http.SameSiteLaxMode,
		drain:             5 * time.Second,
		shutdownGrace:     15 * time.Second,
	}
	with := func(edit func(c *config)) config {
		c := defaults
		edit(&c)
		return c
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want config
	}{
		{name: "defaults", want: defaults},
		{name: "fsync always", args: []string{"--fsync", "always"}, want: with(func(c *config) { c.fsync = jetstream.SyncEveryWrite })},
		{name: "a model's idle time", args: []string{"--model-idle-timeout", "30m"}, want: with(func(c *config) { c.modelIdle = 30 * time.Minute })},
		{name: "a model's idle time, from the environment", env: map[string]string{"GATEWAY_MODEL_IDLE_TIMEOUT": "15m"}, want: with(func(c *config) { c.modelIdle = 15 * time.Minute })},
		{name: "fsync every second, from the environment", env: map[string]string{"GATEWAY_FSYNC": "1s"}, want: with(func(c *config) { c.fsync = time.Second })},
		// An environment's data directory, for every run, leaves a run on
		// the memory store alone; the flag typed with it is refused.
		{name: "a memory store in an environment with a data directory", args: []string{"--store", "memory"}, env: map[string]string{"GATEWAY_DATA_DIR": "/tmp/chats"}, want: with(func(c *config) { c.store, c.dataDir = "memory", "/tmp/chats" })},
		{
			name: "flags",
			args: []string{"--listen", ":9000", "--origins", "a.example, *.b.example,", "--client-timeout", "5s", "--worker-timeout", "1m30s", "--read-limit", "4096", "--log-level", "debug", "--model", "claude-x", "--ping-interval", "1s"},
			want: with(func(c *config) {
				c.listen, c.origins, c.clientTimeout, c.workerTimeout = ":9000", []string{"a.example", "*.b.example"}, 5*time.Second, 90*time.Second
				c.readLimit, c.logLevel, c.model, c.pingInterval = 4096, slog.LevelDebug, "claude-x", time.Second
			}),
		},
		{
			name: "environment",
			env: map[string]string{"GATEWAY_LISTEN": ":7000", "GATEWAY_ORIGINS": "c.example", "GATEWAY_CLIENT_TIMEOUT": "2s",
				"GATEWAY_WORKER_TIMEOUT": "3s", "GATEWAY_READ_LIMIT": "2000", "GATEWAY_LOG_LEVEL": "warn", "GATEWAY_SCRIPT": "s.json", "GATEWAY_OFFLINE": "1", "GATEWAY_PING_INTERVAL": "2s"},
			want: with(func(c *config) {
				c.listen, c.origins, c.clientTimeout, c.workerTimeout = ":7000", []string{"c.example"}, 2*time.Second, 3*time.Second
				c.readLimit, c.logLevel, c.script, c.offline, c.pingInterval = 2000, slog.LevelWarn, "s.json", true, 2*time.Second
			}),
		},
		{
			name: "switches in the environment, as Go reads booleans, in any case",
			env:  map[string]string{"GATEWAY_COOKIE_SECURE": "tRUE", "GATEWAY_OFFLINE": "0"},
			want: with(func(c *config) { c.cookieSecure = true }),
		},
		{
			name: "offline keeps the demo's model scripted whatever key is set",
			env:  map[string]string{"GATEWAY_OFFLINE": "T", "ANTHROPIC_API_KEY": "sk-test"},
			want: with(func(c *config) { c.offline = true }),
		},
		{
			name: "the offline flag keeps the demo's model scripted whatever key is set",
			args: []string{"--offline"},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-test"},
			want: with(func(c *config) { c.offline = true }),
		},
		{
			name: "a switch's flag wins over its variable, even one that is not a boolean",
			args: []string{"--offline", "--cookie-secure=false"},
			env:  map[string]string{"GATEWAY_OFFLINE": "maybe", "GATEWAY_COOKIE_SECURE": "yes"},
			want: with(func(c *config) { c.offline = true }),
		},
		{
			name: "flags win over the environment",
			args: []string{"--listen", ":9000", "--client-timeout", "5s", "--read-limit", "4096"},
			env:  map[string]string{"GATEWAY_LISTEN": ":7000", "GATEWAY_CLIENT_TIMEOUT": "2s", "GATEWAY_READ_LIMIT": "2000"},
			want: with(func(c *config) { c.listen, c.clientTimeout, c.readLimit = ":9000", 5*time.Second, 4096 }),
		},
		{
			name: "compression, from the environment",
			env:  map[string]string{"GATEWAY_COMPRESS_OVER": "1024"},
			want: with(func(c *config) { c.compressOver = 1024 }),
		},
		{
			name: "drain, and the grace that covers it",
			args: []string{"--drain", "30s"},
			want: with(func(c *config) { c.drain, c.shutdownGrace = 30*time.Second, 40*time.Second }),
		},
		{
			name: "limits",
			args: []string{"--max-model-turns", "10", "--max-repeats", "-1"},
			env:  map[string]string{"GATEWAY_MAX_MESSAGE_TOKENS": "1000", "GATEWAY_MAX_SESSION_TOKENS": "9000"},
			want: with(func(c *config) {
				c.limits = engine.Limits{MaxModelTurns: 10, MaxRepeats: -1, MaxMessageTokens: 1000, MaxSessionTokens: 9000}
			}),
		},
		{
			name: "sub-agent limits",
			args: []string{"--max-subagent-depth", "1"},
			env:  map[string]string{"GATEWAY_MAX_SUBAGENT_FANOUT": "-1"},
			want: with(func(c *config) { c.maxDepth, c.maxFanOut = 1, -1 }),
		},
		{
			name: "hosts, with the listen name",
			args: []string{"--hosts", "chat.example.com, *.example.org", "--listen", "gw.internal:8080"},
			want: with(func(c *config) {
				c.hosts, c.listen = []string{"chat.example.com", "*.example.org", "gw.internal"}, "gw.internal:8080"
			}),
		},
		{
			name: "replay memory",
			args: []string{"--replay-memory", "4096"},
			want: with(func(c *config) { c.replayMemory = 4096 }),
		},
		{
			name: "every event kept for replays",
			env:  map[string]string{"GATEWAY_REPLAY_MEMORY": "-1"},
			want: with(func(c *config) { c.replayMemory = -1 }),
		},
		{
			name: "browser shares",
			args: []string{"--max-sockets", "4", "--max-new-sessions", "-1", "--max-live-sessions", "8"},
			want: with(func(c *config) { c.maxSockets, c.maxNew, c.maxLive = 4, -1, 8 }),
		},
		{
			name: "an Anthropic key alone picks Claude",
			env:  map[string]string{"ANTHROPIC_API_KEY": "k"},
			want: with(func(c *config) { c.model = DefaultClaudeModel }),
		},
		{
			name: "an OpenAI key alone picks its model",
			env:  map[string]string{"OPENAI_API_KEY": "k"},
			want: with(func(c *config) { c.model = DefaultOpenAIModel }),
		},
		{
			name: "--model wins over a key",
			args: []string{"--model", "scripted"},
			env:  map[string]string{"ANTHROPIC_API_KEY": "k"},
			want: defaults,
		},
		{
			name: "a chat page on another site",
			args: []string{"--cookie-samesite", "none"},
			want: with(func(c *config) { c.sameSite, c.cookieSecure = http.SameSiteNoneMode, true }),
		},
		{
			name: "a bare port listens on loopback",
			args: []string{"--listen", "8101"},
			want: with(func(c *config) { c.listen = "127.0.0.1:8101" }),
		},
		{
			name: "no drain",
			env:  map[string]string{"GATEWAY_DRAIN": "0s"},
			want: with(func(c *config) { c.drain, c.shutdownGrace = 0, 10*time.Second }),
		},
		{
			name: "worker URL with its secret from the environment",
			args: []string{"--worker-url", "http://127.0.0.1:9/decide"},
			env:  map[string]string{"GATEWAY_WORKER_SECRET": "s3cret"},
			want: with(func(c *config) { c.workerURL, c.workerSecret = "http://127.0.0.1:9/decide", "s3cret" }),
		},
		{
			name: "more requests open to the worker",
			args: []string{"--worker-url", "http://127.0.0.1:9/decide", "--worker-max-in-flight", "256"},
			env:  map[string]string{"GATEWAY_WORKER_SECRET": "s3cret"},
			want: with(func(c *config) {
				c.workerURL, c.workerSecret, c.workerMaxInFlight = "http://127.0.0.1:9/decide", "s3cret", 256
			}),
		},
		{
			name: "larger answers from the worker",
			args: []string{"--worker-url", "http://127.0.0.1:9/decide", "--worker-max-response", "67108864"},
			env:  map[string]string{"GATEWAY_WORKER_SECRET": "s3cret"},
			want: with(func(c *config) {
				c.workerURL, c.workerSecret, c.workerMaxResponse = "http://127.0.0.1:9/decide", "s3cret", 64<<20
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseConfig =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		mention string
	}{
		{"duration without a unit", []string{"--client-timeout", "30"}, nil, "client-timeout"},
		{"not a duration", []string{"--worker-timeout", "soon"}, nil, "worker-timeout"},
		{"zero duration", []string{"--client-timeout", "0s"}, nil, "positive"},
		{"negative duration", []string{"--worker-timeout", "-1s"}, nil, "positive"},
		{"bad duration from the environment", nil, map[string]string{"GATEWAY_CLIENT_TIMEOUT": "forever"}, `client-timeout "forever"`},
		{"the environment is named", nil, map[string]string{"GATEWAY_DRAIN": "bogus"}, `drain "bogus" is not a Go duration of zero or more such as "5s" (from the environment: GATEWAY_DRAIN)`},
		{"replicas on the embedded server", []string{"--nats-replicas", "3"}, nil, "nats-replicas 3 needs a NATS cluster (--nats-url)"},
		{"a NATS URL of another scheme", []string{"--nats-url", "nats://127.0.0.1:4222,bogus://x"}, nil, `nats-url entry "bogus://x" is not a NATS server's URL: its scheme is bogus`},
		{"an empty entry among NATS URLs", []string{"--nats-url", "nats://127.0.0.1:4222,,nats://127.0.0.1:4223"}, nil, "has an empty entry"},
		{"a NATS URL with no host", []string{"--nats-url", "nats://"}, nil, `nats-url entry "nats://" is not a NATS server's URL`},
		{"a node id with a space", []string{"--nats-url", "nats://127.0.0.1:4222", "--node-id", "node a"}, nil, `node-id "node a" cannot name a node`},
		{"a node id with a wildcard", nil, map[string]string{"GATEWAY_NATS_URL": "nats://127.0.0.1:4222", "GATEWAY_NODE_ID": "node>"}, `node-id "node>" cannot name a node`},
		{"a node id ending in a dot", []string{"--nats-url", "nats://127.0.0.1:4222", "--node-id", "gw-1."}, nil, `node-id "gw-1." cannot name a node`},
		{"an empty data directory flag", []string{"--data-dir", ""}, nil, "data-dir is empty: give a directory"},
		{"fsync in words", []string{"--fsync", "often"}, nil, `fsync "often" is not a positive Go duration such as "30s", or always`},
		{"fsync with a NATS URL", []string{"--fsync", "always", "--nats-url", "nats://127.0.0.1:4222"}, nil, "with --nats-url, set sync_interval in that server's configuration"},
		{"fsync with a memory store", []string{"--store", "memory"}, map[string]string{"GATEWAY_FSYNC": "1s"}, "fsync is for --store jetstream: --store memory writes no files"},
		{"replicas on the embedded server, from the environment", nil, map[string]string{"GATEWAY_NATS_REPLICAS": "3"}, "(from the environment: GATEWAY_NATS_REPLICAS)"},
		{"zero replay memory", []string{"--replay-memory", "0"}, nil, "replay-memory"},
		{"a worker secret and no worker", []string{"--worker-secret", "a-secret-of-32-bytes-or-more-xxxxx"}, nil, "worker-secret is for a worker, and there is none: give --worker-url"},
		{"page tools and no worker", []string{"--page-tools", "none"}, nil, "page-tools is for a worker, and there is none"},
		{"a worker bound and no worker", []string{"--worker-max-in-flight", "128"}, nil, "worker-max-in-flight is for a worker, and there is none"},
		{"zero worker requests", []string{"--worker-max-in-flight", "0"}, map[string]string{"GATEWAY_WORKER_URL": "http://127.0.0.1:9000/", "GATEWAY_WORKER_SECRET": "a-secret-of-32-bytes-or-more-xxxxx"}, `worker-max-in-flight "0" is not a positive number of requests`},
		{"worker requests from the environment", nil, map[string]string{"GATEWAY_WORKER_MAX_IN_FLIGHT": "-1"}, "(from the environment: GATEWAY_WORKER_MAX_IN_FLIGHT)"},
		{"an answer bound and no worker", []string{"--worker-max-response", "1000"}, nil, "worker-max-response is for a worker, and there is none"},
		{"a worker answer past a gigabyte", []string{"--worker-max-response", "9223372036854775807"}, map[string]string{"GATEWAY_WORKER_URL": "http://127.0.0.1:9000/", "GATEWAY_WORKER_SECRET": "a-secret-of-32-bytes-or-more-xxxxx"}, `worker-max-response 9223372036854775807 is over 1073741824 bytes (1 GiB)`},
		{"a worker answer of no bytes", []string{"--worker-max-response", "0"}, map[string]string{"GATEWAY_WORKER_URL": "http://127.0.0.1:9000/", "GATEWAY_WORKER_SECRET": "a-secret-of-32-bytes-or-more-xxxxx"}, `worker-max-response "0" is not a positive number of bytes`},
		{"worker answers from the environment", nil, map[string]string{"GATEWAY_WORKER_MAX_RESPONSE": "4MiB"}, "(from the environment: GATEWAY_WORKER_MAX_RESPONSE)"},
		{"an empty listen address", []string{"--listen", ""}, nil, "listen is empty"},
		{"a memory store with a NATS URL", []string{"--store", "memory"}, map[string]string{"GATEWAY_NATS_URL": "nats://127.0.0.1:4222"}, "for --store jetstream"},
		{"a lease shorter than the store keeps", []string{"--lease-ttl", "1ms"}, nil, "lease-ttl 1ms is under 100ms"},
		{"a retention shorter than the store keeps", []string{"--retain", "1ns"}, nil, "retain 1ns is under 100ms"},
		{"replay memory with a unit", []string{"--replay-memory", "64KiB"}, nil, "replay-memory"},
		{"read limit with a unit", []string{"--read-limit", "1MB"}, nil, "read-limit"},
		{"zero read limit", []string{"--read-limit", "0"}, nil, "read-limit"},
		{"a read limit no session.open fits", []string{"--read-limit", "10"}, nil, "read-limit 10 is under 1024 bytes"},
		{"negative read limit", []string{"--read-limit", "-5"}, nil, "read-limit"},
		{"compress-over with a unit", []string{"--compress-over", "1KiB"}, nil, "compress-over"},
		{"negative compress-over", []string{"--compress-over", "-1"}, nil, "compress-over"},
		{"bad read limit from the environment", nil, map[string]string{"GATEWAY_READ_LIMIT": "lots"}, "read-limit"},
		{"bad host pattern", []string{"--hosts", "[a"}, nil, "hosts"},
		{"bad origin pattern", []string{"--origins", "app.example.com,a["}, nil, `origins: "a[" is not a host pattern`},
		{"a switch that is not a boolean", nil, map[string]string{"GATEWAY_COOKIE_SECURE": "yes"}, `GATEWAY_COOKIE_SECURE "yes": want 1, t or true`},
		{"offline that is not a boolean", nil, map[string]string{"GATEWAY_OFFLINE": "on"}, `GATEWAY_OFFLINE "on"`},
		{"zero sockets", []string{"--max-sockets", "0"}, nil, "max-sockets"},
		{"bad samesite", []string{"--cookie-samesite", "loose"}, nil, "cookie-samesite"},
		{"bad page tools", []string{"--page-tools", "all"}, nil, "page-tools"},
		{"zero model turns", []string{"--max-model-turns", "0"}, nil, "max-model-turns"},
		{"tokens in words", []string{"--max-session-tokens", "lots"}, nil, "max-session-tokens"},
		{"zero sub-agent depth", []string{"--max-subagent-depth", "0"}, nil, "max-subagent-depth"},
		{"zero max message", []string{"--max-message", "0"}, nil, "max-message"},
		{"negative drain", []string{"--drain", "-1s"}, nil, "drain"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "log-level"},
		{"unknown flag", []string{"--colour"}, nil, "-colour (gateway -h lists the flags)"},
		{"stray argument", []string{"serve"}, nil, `"serve"`},
		{"worker URL without a secret", []string{"--worker-url", "http://127.0.0.1:9/"}, nil, "GATEWAY_WORKER_SECRET"},
		{"a worker URL that is not one", []string{"--worker-url", "::bad"}, map[string]string{"GATEWAY_WORKER_SECRET": "s"}, `worker-url "::bad" is not an http(s) URL`},
		{"a worker URL from the environment", nil, map[string]string{"GATEWAY_WORKER_URL": "ftp://w", "GATEWAY_WORKER_SECRET": "s"}, "(from the environment: GATEWAY_WORKER_URL)"},
		{"a bad origin pattern from the environment", nil, map[string]string{"GATEWAY_ORIGINS": "a["}, "(from the environment: GATEWAY_ORIGINS)"},
		{"a listen address with no port", []string{"--listen", "nope"}, nil, `listen "nope": want host:port`},
		{"a metrics address with no port, from the environment", nil, map[string]string{"GATEWAY_METRICS_LISTEN": "nope"}, `metrics-listen "nope": want host:port, :port for every interface, or a bare port for 127.0.0.1 (from the environment: GATEWAY_METRICS_LISTEN)`},
		{"a memory store with a NATS URL from the environment", []string{"--store", "memory"}, map[string]string{"GATEWAY_NATS_URL": "nats://127.0.0.1:4222"}, "(from the environment: GATEWAY_NATS_URL)"},
		{"a memory store with replicas", []string{"--store", "memory", "--nats-replicas", "3"}, nil, "nats-replicas 3 is for --store jetstream"},
		{"a memory store with one replica given", []string{"--store", "memory", "--nats-replicas", "1"}, nil, "nats-replicas 1 is for --store jetstream"},
		{"a memory store with a data directory", []string{"--store", "memory", "--data-dir", "/tmp/chats"}, nil, "data-dir is for --store jetstream: --store memory writes nothing there"},
		{"a ping interval no pong meets", []string{"--ping-interval", "1ms"}, nil, "ping-interval 1ms is under 100ms"},
		{"a model idle time of none", []string{"--model-idle-timeout", "0s"}, nil, "model-idle-timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("parseConfig error = %v, want one naming %s", err, tc.mention)
			}
			// The caller prints the error: nothing else is printed, so the
			// user reads it once.
			if stderr.Len() > 0 {
				t.Errorf("parseConfig printed %q besides its error", stderr.String())
			}
		})
	}
}

func TestParseConfigHelp(t *testing.T) {
	var stderr strings.Builder
	_, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseConfig(-h) = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"-listen", "GATEWAY_LISTEN", "-read-limit", "-client-timeout"} {
		if !strings.Contains(stderr.String(), name) {
			t.Errorf("usage does not mention %s:\n%s", name, stderr.String())
		}
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	err := run(t.Context(), []string{"--read-limit", "0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "read-limit") {
		t.Errorf("run = %v, want the read-limit error", err)
	}
}

// TestRunThatCannotListenWritesNothing: a start whose address is taken
// (or whose metrics address is) fails before it opens the store: the data
// directory is not even made.
func TestRunThatCannotListenWritesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, flag := range []string{"--listen", "--metrics-listen"} {
		dir := filepath.Join(t.TempDir(), "data")
		args := []string{"--listen", "127.0.0.1:0", "--data-dir", dir, flag, taken.Addr().String()}
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "failed to listen") {
			t.Errorf("%s on a taken address: %v, want failed to listen", flag, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s on a taken address: the data directory was made (%v)", flag, err)
		}
	}
}

// TestDescribeModel: the start's "gateway model:" line says which model
// serves the demo, and why.
func TestDescribeModel(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "scripted (offline; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real model)"},
		{map[string]string{"ANTHROPIC_API_KEY": "k"}, nil, "claude-haiku-4-5 (Claude; --model chooses another)"},
		{map[string]string{"OPENAI_API_KEY": "k"}, nil, "gpt-4.1-mini (OpenAI-compatible; --model chooses another)"},
		// --openai-models routes Claude's ids through an OpenAI-compatible proxy.
		{map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "OPENAI_MODELS": "claude-"}, []string{"--model", "claude-x"}, "claude-x (OpenAI-compatible; --model chooses another)"},
		{map[string]string{"ANTHROPIC_API_KEY": "k"}, []string{"--offline"}, "scripted (--offline: every model id is served by the scripted model)"},
		{map[string]string{"ANTHROPIC_API_KEY": "k", "GATEWAY_OFFLINE": "1"}, []string{"--offline=false"}, "claude-haiku-4-5 (Claude; --model chooses another)"},
		{map[string]string{"GATEWAY_WORKER_SECRET": "s"}, []string{"--worker-url", "http://127.0.0.1:9/"}, "chosen by the worker (--worker-url)"},
	} {
		getenv := func(k string) string { return tc.env[k] }
		cfg, err := parseConfig(tc.args, getenv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var models model.Resolver
		if cfg.workerURL == "" {
			if models, err = buildModels(cfg, getenv, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
		}
		if got := describeModel(cfg, models); got != tc.want {
			t.Errorf("env %v, args %v: %q, want %q", tc.env, tc.args, got, tc.want)
		}
	}
}

// TestUnreachableNATSIsNamed: a NATS that does not answer is refused naming
// the flag and the servers, without the password.
func TestUnreachableNATSIsNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = openStore(context.Background(), config{store: "jetstream", natsURL: "nats://alice:s3cret@" + addr, natsReplicas: 1, retain: time.Hour, leaseTTL: time.Second}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "nats-url nats://alice:xxxxx@"+addr) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("openStore with no NATS there: %v, want it to name --nats-url and the server, without the password", err)
	}
}
