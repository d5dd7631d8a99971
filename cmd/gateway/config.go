package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model/anthropic"
	"github.com/clienttools/gateway/engine/model/providers"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/httpworker"
	"github.com/clienttools/gateway/store/jetstream"
)

// config is everything the flags and environment say.
type config struct {
	listen        string
	origins       []string
	hosts         []string
	metricsListen string
	pageTools     bool
	sameSite      http.SameSite
	cookieSecure  bool
	maxSockets    int
	maxNew        int
	maxLive       int
	maxDepth      int // sub-agents: engine.Options.MaxDepth
	maxFanOut     int // and MaxFanOut
	model         string
	script        string
	clientTimeout time.Duration
	workerTimeout time.Duration
	readLimit     int64
	compressOver  int
	maxMessage    int
	limits        engine.Limits
	pingInterval  time.Duration
	store         string // jetstream or memory
	dataDir       string
	natsURL       string
	natsReplicas  int
	fsync         time.Duration // jetstream.Options.Sync
	retain        time.Duration
	unload        time.Duration
	replayMemory  int
	nodeID        string
	leaseTTL      time.Duration
	drain         time.Duration
	workerURL     string
	anthropicURL  string
	openaiURL     string
	modelIdle     time.Duration
	openaiModels  []string
	offline       bool
	workerSecret  string
	// workerMaxInFlight bounds the requests open to the HTTP worker at once.
	workerMaxInFlight int
	// workerMaxResponse bounds what a worker's answer adds to its request.
	workerMaxResponse int64
	logLevel          slog.Level
	shutdownGrace     time.Duration
}

// The demo's model when a provider's key is set and no --model is given.
const (
	DefaultClaudeModel = "claude-haiku-4-5"
	DefaultOpenAIModel = "gpt-4.1-mini"
)

// DefaultDrain is --drain's default: long enough for a worker tool call
// that is nearly done, short enough for a rolling deploy's SIGTERM grace.
const DefaultDrain = 5 * time.Second

// maxWorkerResponse is the largest --worker-max-response taken: each
// request in flight may hold that much, and more than a gigabyte in one
// answer is a mistake (near the int64's limit, the reader's bound overflowed
// and every answer read as empty).
const maxWorkerResponse = 1 << 30

// minReadLimit is the smallest --read-limit taken: a session.open that
// declares a few tools, and a short message, fit in it.
const minReadLimit = 1024

// defaultModel is the demo's model: a key alone switches it to that
// provider's model, so a user with a key gets a real model at once.
func defaultModel(offline bool, getenv func(string) string) string {
	switch {
	case offline:
		return "scripted"
	case getenv("ANTHROPIC_API_KEY") != "":
		return DefaultClaudeModel
	case getenv("OPENAI_API_KEY") != "":
		return DefaultOpenAIModel
	}
	return "scripted"
}

// hostPatterns reads a flag's comma-separated host patterns, refusing one
// path.Match cannot read.
func hostPatterns(flag, list string) ([]string, error) {
	var patterns []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("%s: %q is not a host pattern: %w", flag, p, err)
			}
			patterns = append(patterns, p)
		}
	}
	return patterns, nil
}

// parseConfig reads flags, each falling back to an environment variable.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (c config, err error) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	defer func() {
		if err != nil {
			err = fromEnv(fs, getenv, err)
		}
	}()
	// The flag package prints a bad flag's error and the whole usage; the
	// caller prints the error once, and -h prints the usage.
	fs.SetOutput(io.Discard)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	// A switch's variable that is not a boolean, by its flag: said after
	// parsing, unless the flag was given, which overrides it.
	envErrs := map[string]error{}
	envBool := func(flagName, name string) bool {
		v := getenv(name)
		if v == "" {
			return false
		}
		on, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			envErrs[flagName] = fmt.Errorf("%s %q: want 1, t or true to turn it on, 0, f or false to leave it off (any case)", name, v)
		}
		return on
	}
	offline := envBool("offline", "GATEWAY_OFFLINE")
	fs.StringVar(&c.listen, "listen", env("GATEWAY_LISTEN", "127.0.0.1:8080"), "address to listen on: host:port, :port for every interface, or a bare port for 127.0.0.1 (env GATEWAY_LISTEN)")
	origins := fs.String("origins", env("GATEWAY_ORIGINS", ""), "comma-separated host patterns of other sites whose pages may open /ws (env GATEWAY_ORIGINS); same-origin is always allowed")
	fs.StringVar(&c.metricsListen, "metrics-listen", env("GATEWAY_METRICS_LISTEN", ""), "address to serve /metrics on, apart from the chat's listener (env GATEWAY_METRICS_LISTEN); default: /metrics on --listen")
	hosts := fs.String("hosts", env("GATEWAY_HOSTS", ""), "comma-separated host names (patterns such as *.example.com) the gateway answers to, besides IP addresses, localhost, the --listen host and the --origins hosts; other Hosts get 403. \"*\": any (env GATEWAY_HOSTS)")
	maxSockets := fs.String("max-sockets", env("GATEWAY_MAX_SOCKETS", strconv.Itoa(gateway.DefaultMaxSockets)), "WebSockets one browser may hold open on this node; one more is closed with 4002; -1: no limit (env GATEWAY_MAX_SOCKETS)")
	maxNew := fs.String("max-new-sessions", env("GATEWAY_MAX_NEW_SESSIONS", strconv.Itoa(gateway.DefaultNewSessionsPerMinute)), "new sessions one browser may open a minute on this node; one more is refused with rate_limited; -1: no limit (env GATEWAY_MAX_NEW_SESSIONS)")
	maxLive := fs.String("max-live-sessions", env("GATEWAY_MAX_LIVE_SESSIONS", strconv.Itoa(engine.DefaultMaxLiveSessions)), "sessions one browser may have in memory on this node; past it a new one is refused with limit_exceeded until one of its chats leaves memory (--unload after its last page left), and a chat it goes back to makes room by unloading another idle for 5s, or is refused; -1: no limit (env GATEWAY_MAX_LIVE_SESSIONS)")
	fs.StringVar(&c.model, "model", env("GATEWAY_MODEL", defaultModel(offline, getenv)), "model id of the demo agent: scripted, or a provider's model id (env GATEWAY_MODEL); default "+DefaultClaudeModel+" when ANTHROPIC_API_KEY is set, else "+DefaultOpenAIModel+" when OPENAI_API_KEY is, else scripted")
	fs.StringVar(&c.script, "script", env("GATEWAY_SCRIPT", ""), "script file for the scripted model, replacing the demo script (env GATEWAY_SCRIPT; format in docs/scripts.md)")
	fs.StringVar(&c.anthropicURL, "anthropic-base-url", "", "Claude API base URL (env ANTHROPIC_BASE_URL); the key is read from ANTHROPIC_API_KEY only")
	fs.StringVar(&c.openaiURL, "openai-base-url", "", "base URL of an OpenAI-compatible server, ending in /v1 (env OPENAI_BASE_URL); the key is read from OPENAI_API_KEY only")
	modelIdle := fs.String("model-idle-timeout", env("GATEWAY_MODEL_IDLE_TIMEOUT", anthropic.DefaultStreamIdleTimeout.String()), "how long a model's stream (Claude, OpenAI-compatible) may send no event, from the request on, before its turn is cut off; raise it for a local server that thinks longer over a big prompt (env GATEWAY_MODEL_IDLE_TIMEOUT)")
	openaiModels := fs.String("openai-models", "", "comma-separated model-id prefixes served by the OpenAI-compatible server; empty: "+strings.Join(providers.DefaultOpenAIModels, ",")+" (env OPENAI_MODELS)")
	fs.StringVar(&c.workerURL, "worker-url", env("GATEWAY_WORKER_URL", ""), "URL of an HTTP worker that decides every step, replacing the embedded demo worker (env GATEWAY_WORKER_URL; docs/workers.md)")
	sameSite := fs.String("cookie-samesite", env("GATEWAY_COOKIE_SAMESITE", "lax"), "the identity cookie's SameSite: lax, strict, or none for a chat page on another site than the gateway (none makes the cookie Secure, as browsers require) (env GATEWAY_COOKIE_SAMESITE)")
	fs.BoolVar(&c.cookieSecure, "cookie-secure", envBool("cookie-secure", "GATEWAY_COOKIE_SECURE"), "send the identity cookie over HTTPS only: set it when the gateway is served over HTTPS (env GATEWAY_COOKIE_SECURE=1)")
	pageTools := fs.String("page-tools", env("GATEWAY_PAGE_TOOLS", "demo"), "with --worker-url: demo adds the demo page's browser tools (get_local_time, set_theme, confirm; not its test tools) to the worker's agent where it lacks them; none leaves the agent as the worker wrote it (env GATEWAY_PAGE_TOOLS)")
	fs.BoolVar(&c.offline, "offline", offline, "serve every model id with the scripted model, so a worker written for Claude runs without a key (env GATEWAY_OFFLINE=1)")
	fs.StringVar(&c.workerSecret, "worker-secret", "", "shared secret that signs requests to the HTTP worker (prefer env GATEWAY_WORKER_SECRET: flags show in ps)")
	workerMaxInFlight := fs.String("worker-max-in-flight", env("GATEWAY_WORKER_MAX_IN_FLIGHT", strconv.Itoa(httpworker.DefaultMaxInFlight)), "tool calls' requests the gateway keeps open to the HTTP worker at once, and as many for the other triggers apart; more wait for one to end, and one whose time runs out waiting is not sent (counted as no_slot): raise it when the worker's tools are slow and many run at once (env GATEWAY_WORKER_MAX_IN_FLIGHT)")
	workerMaxResponse := fs.String("worker-max-response", env("GATEWAY_WORKER_MAX_RESPONSE", strconv.Itoa(httpworker.DefaultMaxResponseBytes)), "bytes a worker's answer may hold beyond its request's (which it may repeat: proposed); a larger answer fails as the worker's failure: raise it for tools whose results are larger (env GATEWAY_WORKER_MAX_RESPONSE)")
	clientTimeout := fs.String("client-timeout", env("GATEWAY_CLIENT_TIMEOUT", engine.DefaultClientTimeout.String()), "default limit of one browser tool attempt (env GATEWAY_CLIENT_TIMEOUT)")
	workerTimeout := fs.String("worker-timeout", env("GATEWAY_WORKER_TIMEOUT", engine.DefaultWorkerTimeout.String()), "default limit of one worker tool attempt (env GATEWAY_WORKER_TIMEOUT)")
	pingInterval := fs.String("ping-interval", env("GATEWAY_PING_INTERVAL", gateway.DefaultPingInterval.String()), "how often each page is pinged, and how long its pong may take; a page that misses it is closed and its client calls move to another page (env GATEWAY_PING_INTERVAL)")
	fs.StringVar(&c.store, "store", env("GATEWAY_STORE", "jetstream"), "where sessions are kept: jetstream (durable: an embedded NATS server in --data-dir, or --nats-url) or memory (for tests: every chat held in RAM for --retain, and lost on restart) (env GATEWAY_STORE)")
	fs.StringVar(&c.dataDir, "data-dir", env("GATEWAY_DATA_DIR", defaultDataDir(getenv)), "directory of the embedded NATS server's files: every session and browser identity (env GATEWAY_DATA_DIR)")
	fs.StringVar(&c.natsURL, "nats-url", env("GATEWAY_NATS_URL", ""), "an existing NATS server or cluster to keep sessions on, instead of the embedded one (env GATEWAY_NATS_URL)")
	natsReplicas := fs.String("nats-replicas", env("GATEWAY_NATS_REPLICAS", "1"), "replicas of the session stream and buckets on a NATS cluster: 3 on a cluster of three or more (env GATEWAY_NATS_REPLICAS)")
	fsync := fs.String("fsync", env("GATEWAY_FSYNC", jetstream.DefaultSync.String()), "how often the embedded NATS server flushes its files to the disk: a Go duration, or always, for each write before it is acknowledged (a power loss then loses nothing acknowledged; each write waits for the disk) (env GATEWAY_FSYNC); with --nats-url, that server's sync_interval applies")
	retain := fs.String("retain", env("GATEWAY_RETAIN", engine.DefaultRetain.String()), "how long a session is kept after its last message before it is deleted, and a browser's identity (its cookie) after its last visit (env GATEWAY_RETAIN)")
	unload := fs.String("unload", env("GATEWAY_UNLOAD", engine.DefaultUnload.String()), "how long an idle session with no page stays in memory before it unloads; its page loads it again (env GATEWAY_UNLOAD)")
	fs.StringVar(&c.nodeID, "node-id", env("GATEWAY_NODE_ID", ""), "this gateway's name among the nodes sharing --nats-url, unique and stable across restarts, such as a pod's name (env GATEWAY_NODE_ID); default a random id, so a restarted node waits --lease-ttl for its sessions")
	leaseTTL := fs.String("lease-ttl", env("GATEWAY_LEASE_TTL", jetstream.DefaultLeaseTTL.String()), "how long a session's lease lasts unrenewed: another node runs a dead node's sessions after at most this (env GATEWAY_LEASE_TTL)")
	drain := fs.String("drain", env("GATEWAY_DRAIN", DefaultDrain.String()), "on SIGTERM, how long worker tool calls that are running may finish before their sessions are handed over; calls still running then settle as after a crash (env GATEWAY_DRAIN)")
	replayMemory := fs.String("replay-memory", env("GATEWAY_REPLAY_MEMORY", strconv.Itoa(engine.DefaultReplayBytes)), "bytes of its latest events a session in memory keeps for the pages that resume, counting 64 a frame for its bookkeeping; a page that resumes from before them (a longer chat opened from its start) is replayed from the store; -1: every event (env GATEWAY_REPLAY_MEMORY)")
	readLimit := fs.String("read-limit", env("GATEWAY_READ_LIMIT", strconv.Itoa(gateway.DefaultReadLimit)), "largest frame a browser may send, in bytes (env GATEWAY_READ_LIMIT)")
	compressOver := fs.String("compress-over", env("GATEWAY_COMPRESS_OVER", "0"), "send a page's frames of at least this many bytes compressed (permessage-deflate, which every current browser offers; each frame on its own): a long chat's replay, long messages and tool results cross a slow network in a fraction of their bytes, for 4 KiB more held per page; 1024 is a good value; 0: never (env GATEWAY_COMPRESS_OVER)")
	maxMessage := fs.String("max-message", env("GATEWAY_MAX_MESSAGE", strconv.Itoa(engine.DefaultMaxMessageBytes)), "longest user message a session takes, in bytes; longer ones are refused with limit_exceeded (env GATEWAY_MAX_MESSAGE)")
	maxModelTurns := fs.String("max-model-turns", env("GATEWAY_MAX_MODEL_TURNS", strconv.Itoa(engine.DefaultLimits.MaxModelTurns)), "model turns that may answer one user message, for agents whose config sets none; -1: no limit (env GATEWAY_MAX_MODEL_TURNS)")
	maxRepeats := fs.String("max-repeats", env("GATEWAY_MAX_REPEATS", strconv.Itoa(engine.DefaultLimits.MaxRepeats)), "times the model may ask for the same tool with the same arguments while answering one message; that many stops the turn; -1: no limit (env GATEWAY_MAX_REPEATS)")
	maxMessageTokens := fs.String("max-message-tokens", env("GATEWAY_MAX_MESSAGE_TOKENS", strconv.Itoa(engine.DefaultLimits.MaxMessageTokens)), "tokens the model turns answering one user message may use; -1: no limit (env GATEWAY_MAX_MESSAGE_TOKENS)")
	maxDepth := fs.String("max-subagent-depth", env("GATEWAY_MAX_SUBAGENT_DEPTH", strconv.Itoa(engine.DefaultMaxDepth)), "how deep sub-agents may nest (a sub-agent of the session's agent is at depth 1); a deeper delegation settles its call subagent_failed; -1: no limit (env GATEWAY_MAX_SUBAGENT_DEPTH)")
	maxFanOut := fs.String("max-subagent-fanout", env("GATEWAY_MAX_SUBAGENT_FANOUT", strconv.Itoa(engine.DefaultMaxFanOut)), "sub-agents one agent may have running at once; one more settles its call subagent_failed; -1: no limit (env GATEWAY_MAX_SUBAGENT_FANOUT)")
	maxSessionTokens := fs.String("max-session-tokens", env("GATEWAY_MAX_SESSION_TOKENS", strconv.Itoa(engine.DefaultLimits.MaxSessionTokens)), "tokens one session's model turns may use in all; -1: no limit (env GATEWAY_MAX_SESSION_TOKENS)")
	logLevel := fs.String("log-level", env("GATEWAY_LOG_LEVEL", "info"), "debug, info, warn or error (env GATEWAY_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage of gateway (each flag also reads the environment variable it names):")
			fs.PrintDefaults()
			fmt.Fprintln(stderr, "\nCommands on the store, instead of serving (docs/storage.md), beside a gateway that runs or not:\n  gateway sessions [--data-dir DIR | --nats-url URL]         every chat, one JSON object a line\n  gateway delete [--data-dir DIR | --nats-url URL] ID...    delete chats by id\n  gateway backup [--data-dir DIR | --nats-url URL] --to DIR  copy every chat into a new data directory")
			return c, err
		}
		return c, fmt.Errorf("%w (gateway -h lists the flags)", err)
	}
	fs.Visit(func(f *flag.Flag) { delete(envErrs, f.Name) })
	for _, name := range []string{"offline", "cookie-secure"} {
		if err := envErrs[name]; err != nil {
			return c, err
		}
	}
	if getenv("GATEWAY_MODEL") == "" && !given(fs, "model") {
		// The default follows --offline as parsed: the flag wins over
		// GATEWAY_OFFLINE, which the default was drawn from.
		c.model = defaultModel(c.offline, getenv)
	}
	if strings.TrimSpace(c.listen) == "" {
		return c, fmt.Errorf("listen is empty: give host:port, :port for every interface, or a bare port for 127.0.0.1")
	}
	if _, err := strconv.Atoi(c.listen); err == nil {
		c.listen = "127.0.0.1:" + c.listen // a bare port: this machine only, like the default
	}
	for _, l := range []struct{ name, addr string }{{"listen", c.listen}, {"metrics-listen", c.metricsListen}} {
		if _, _, err := net.SplitHostPort(l.addr); l.addr != "" && err != nil {
			return c, fmt.Errorf("%s %q: want host:port, :port for every interface, or a bare port for 127.0.0.1", l.name, l.addr)
		}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.clientTimeout, err = positiveDuration("client-timeout", *clientTimeout); err != nil {
		return c, err
	}
	if c.workerTimeout, err = positiveDuration("worker-timeout", *workerTimeout); err != nil {
		return c, err
	}
	if c.pingInterval, err = positiveDuration("ping-interval", *pingInterval); err != nil {
		return c, err
	}
	if c.modelIdle, err = positiveDuration("model-idle-timeout", *modelIdle); err != nil {
		return c, err
	}
	if c.retain, err = positiveDuration("retain", *retain); err != nil {
		return c, err
	}
	if c.unload, err = positiveDuration("unload", *unload); err != nil {
		return c, err
	}
	if c.replayMemory, err = strconv.Atoi(*replayMemory); err != nil || (c.replayMemory <= 0 && c.replayMemory != -1) {
		return c, fmt.Errorf("replay-memory %q is not a positive number of bytes, or -1 for every event", *replayMemory)
	}
	if c.leaseTTL, err = positiveDuration("lease-ttl", *leaseTTL); err != nil {
		return c, err
	}
	// JetStream keeps nothing for less (a stream's or a bucket's max age).
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"retain", c.retain}, {"lease-ttl", c.leaseTTL}} {
		if d.value < 100*time.Millisecond {
			return c, fmt.Errorf("%s %v is under 100ms, the shortest time the store keeps anything for", d.name, d.value)
		}
	}
	if c.pingInterval < 100*time.Millisecond {
		// The pong must come back within it: every page would be closed.
		return c, fmt.Errorf("ping-interval %v is under 100ms: a page's pong must come back within it, and most would not", c.pingInterval)
	}
	if c.drain, err = time.ParseDuration(*drain); err != nil || c.drain < 0 {
		return c, fmt.Errorf("drain %q is not a Go duration of zero or more such as \"5s\"", *drain)
	}
	if c.natsReplicas, err = strconv.Atoi(*natsReplicas); err != nil || c.natsReplicas < 1 || c.natsReplicas > 5 {
		return c, fmt.Errorf("nats-replicas %q is not a number from 1 to 5", *natsReplicas)
	}
	if c.natsReplicas > 1 && c.natsURL == "" && c.store == "jetstream" {
		// The embedded server is one node: it would refuse the streams,
		// after a wait.
		return c, fmt.Errorf("nats-replicas %d needs a NATS cluster (--nats-url): the embedded NATS server is one node and keeps one copy", c.natsReplicas)
	}
	fsyncSet := getenv("GATEWAY_FSYNC") != "" || given(fs, "fsync")
	switch {
	case *fsync == "always":
		c.fsync = jetstream.SyncEveryWrite
	default:
		if c.fsync, err = positiveDuration("fsync", *fsync); err != nil {
			return c, fmt.Errorf("%w, or always", err)
		}
	}
	// Where it would do nothing, the operator meant something that is not
	// happening.
	switch {
	case fsyncSet && c.store == "memory":
		return c, fmt.Errorf("fsync is for --store jetstream: --store memory writes no files")
	case fsyncSet && c.natsURL != "":
		return c, fmt.Errorf("fsync sets the embedded NATS server's flushes to the disk: with --nats-url, set sync_interval in that server's configuration")
	}
	switch c.store {
	case "jetstream":
		if err := checkNATSURLs(c.natsURL); err != nil {
			return c, err
		}
		if err := checkNodeID(c.nodeID); err != nil {
			return c, err
		}
		if c.natsURL == "" && strings.TrimSpace(c.dataDir) == "" {
			// filepath.Abs("") is the working directory: not a place
			// anyone meant for every chat.
			return c, fmt.Errorf("data-dir is empty: give a directory, or leave the flag out for the default, %s", defaultDataDir(getenv))
		}
	case "memory":
		// A node meant for a cluster that kept nothing would be worse
		// than one that does not start.
		switch {
		case c.natsURL != "":
			return c, fmt.Errorf("nats-url is for --store jetstream: --store memory keeps sessions in this process")
		case c.natsReplicas > 1 || given(fs, "nats-replicas"):
			return c, fmt.Errorf("nats-replicas %d is for --store jetstream: --store memory keeps sessions in this process", c.natsReplicas)
		case given(fs, "data-dir"):
			// On the command line, not from an environment that sets it
			// for every run: whoever typed it meant chats to be kept.
			return c, fmt.Errorf("data-dir is for --store jetstream: --store memory writes nothing there, and every chat is lost when the process stops")
		}
	default:
		return c, fmt.Errorf("store %q: want jetstream or memory", c.store)
	}
	if c.readLimit, err = strconv.ParseInt(*readLimit, 10, 64); err != nil || c.readLimit <= 0 {
		return c, fmt.Errorf("read-limit %q is not a positive number of bytes", *readLimit)
	}
	if c.readLimit < minReadLimit {
		return c, fmt.Errorf("read-limit %d is under %d bytes: a page's session.open, its tools named, would not fit, and every page would be closed with 1009", c.readLimit, minReadLimit)
	}
	if c.compressOver, err = strconv.Atoi(*compressOver); err != nil || c.compressOver < 0 {
		return c, fmt.Errorf("compress-over %q: want a number of bytes, or 0 for never", *compressOver)
	}
	switch strings.ToLower(*sameSite) {
	case "lax":
		c.sameSite = http.SameSiteLaxMode
	case "strict":
		c.sameSite = http.SameSiteStrictMode
	case "none":
		c.sameSite, c.cookieSecure = http.SameSiteNoneMode, true
	default:
		return c, fmt.Errorf("cookie-samesite %q: want lax, strict or none", *sameSite)
	}
	switch *pageTools {
	case "demo":
		c.pageTools = true
	case "none":
	default:
		return c, fmt.Errorf("page-tools %q: want demo or none", *pageTools)
	}
	if c.workerMaxInFlight, err = strconv.Atoi(*workerMaxInFlight); err != nil || c.workerMaxInFlight <= 0 {
		return c, fmt.Errorf("worker-max-in-flight %q is not a positive number of requests", *workerMaxInFlight)
	}
	if c.workerMaxResponse, err = strconv.ParseInt(*workerMaxResponse, 10, 64); err != nil || c.workerMaxResponse <= 0 {
		return c, fmt.Errorf("worker-max-response %q is not a positive number of bytes", *workerMaxResponse)
	}
	if c.workerMaxResponse > maxWorkerResponse {
		return c, fmt.Errorf("worker-max-response %d is over %d bytes (1 GiB), the most the gateway holds of one answer", c.workerMaxResponse, maxWorkerResponse)
	}
	if c.maxMessage, err = strconv.Atoi(*maxMessage); err != nil || c.maxMessage <= 0 {
		return c, fmt.Errorf("max-message %q is not a positive number of bytes", *maxMessage)
	}
	for _, l := range []struct {
		name string
		text string
		into *int
	}{
		{"max-sockets", *maxSockets, &c.maxSockets},
		{"max-new-sessions", *maxNew, &c.maxNew},
		{"max-live-sessions", *maxLive, &c.maxLive},
		{"max-model-turns", *maxModelTurns, &c.limits.MaxModelTurns},
		{"max-repeats", *maxRepeats, &c.limits.MaxRepeats},
		{"max-message-tokens", *maxMessageTokens, &c.limits.MaxMessageTokens},
		{"max-session-tokens", *maxSessionTokens, &c.limits.MaxSessionTokens},
		{"max-subagent-depth", *maxDepth, &c.maxDepth},
		{"max-subagent-fanout", *maxFanOut, &c.maxFanOut},
	} {
		if *l.into, err = strconv.Atoi(l.text); err != nil || *l.into == 0 || *l.into < -1 {
			return c, fmt.Errorf("%s %q is not a positive number, or -1 for no limit", l.name, l.text)
		}
	}
	if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return c, fmt.Errorf("log-level %q: want debug, info, warn or error", *logLevel)
	}
	for _, p := range strings.Split(*openaiModels, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.openaiModels = append(c.openaiModels, p)
		}
	}
	if c.hosts, err = hostPatterns("hosts", *hosts); err != nil {
		return c, err
	}
	// The name the gateway listens on is one it answers to.
	if h, _, err := net.SplitHostPort(c.listen); err == nil && h != "" && net.ParseIP(h) == nil {
		c.hosts = append(c.hosts, h)
	}
	if c.origins, err = hostPatterns("origins", *origins); err != nil {
		return c, err
	}
	if c.workerSecret == "" {
		c.workerSecret = getenv("GATEWAY_WORKER_SECRET")
	}
	if c.workerURL != "" {
		if u, err := url.Parse(c.workerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("worker-url %q is not an http(s) URL such as http://127.0.0.1:9000/decide", c.workerURL)
		}
	}
	if c.workerURL != "" && c.workerSecret == "" {
		return c, errors.New("worker-url needs a secret: set GATEWAY_WORKER_SECRET (or --worker-secret, which ps shows)")
	}
	// On the command line, not from an environment that sets them for
	// every run: whoever typed them meant a worker, and the demo agent
	// would answer instead, without a word (a misspelt or missing
	// --worker-url).
	if c.workerURL == "" {
		for _, name := range []string{"worker-secret", "page-tools", "worker-max-in-flight", "worker-max-response"} {
			if given(fs, name) {
				return c, fmt.Errorf("%s is for a worker, and there is none: give --worker-url (or GATEWAY_WORKER_URL), or leave --%s out for the demo's agent", name, name)
			}
		}
	}
	// The drain, then the sockets, the sessions and the store.
	c.shutdownGrace = c.drain + 10*time.Second
	return c, nil
}

// given reports whether flag name is on the command line.
func given(fs *flag.FlagSet, name string) bool {
	on := false
	fs.Visit(func(f *flag.Flag) { on = on || f.Name == name })
	return on
}

// fromEnv says which environment variable a bad value came from: err
// names a flag first ("drain \"x\" is not ..."), and when that flag was not
// given, its value is its variable's (the variable its usage names).
func fromEnv(fs *flag.FlagSet, getenv func(string) string, err error) error {
	name, _, _ := strings.Cut(err.Error(), " ")
	f := fs.Lookup(strings.TrimSuffix(name, ":"))
	if f == nil {
		return err
	}
	_, variable, ok := strings.Cut(f.Usage, "(env ")
	// The name alone: "(env NAME)", "(env NAME=1)", "(env NAME; see ...)".
	if end := strings.IndexFunc(variable, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') }); end >= 0 {
		variable = variable[:end]
	}
	if given(fs, f.Name) || !ok || variable == "" || getenv(variable) == "" {
		return err
	}
	return fmt.Errorf("%w (from the environment: %s)", err, variable)
}

func positiveDuration(name, text string) (time.Duration, error) {
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive Go duration such as \"30s\"", name, text)
	}
	return d, nil
}

// checkNodeID refuses a --node-id NATS subjects cannot carry: the node's
// relay, its leases and its key in the leases' bucket are named by it.
// Letters, digits, '-', '_', and '.' between them (a host's name).
func checkNodeID(id string) error {
	if id == "" {
		return nil // a random one
	}
	for _, part := range strings.Split(id, ".") {
		if part == "" || strings.IndexFunc(part, func(r rune) bool {
			return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) >= 0 {
			return fmt.Errorf("node-id %q cannot name a node: use letters, digits, '-' and '_', with '.' only between them (a pod's or a host's name)", id)
		}
	}
	return nil
}

// checkNATSURLs refuses an entry of --nats-url that names no NATS server:
// the client would skip it in silence, and a cluster's node meant to
// reach three servers would reach fewer. An entry is a URL of scheme
// nats, tls, ws or wss, or host:port.
func checkNATSURLs(list string) error {
	if list == "" {
		return nil
	}
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		raw := entry
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		switch {
		case entry == "":
			return fmt.Errorf("nats-url %q has an empty entry: give the servers' URLs, comma-separated", jetstream.RedactedURLs(list))
		case err != nil || u.Host == "":
			return fmt.Errorf("nats-url entry %q is not a NATS server's URL (nats://host:port, or host:port)", jetstream.RedactedURLs(entry))
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			return fmt.Errorf("nats-url entry %q is not a NATS server's URL: its scheme is %s, where nats, tls, ws or wss is", jetstream.RedactedURLs(entry), u.Scheme)
		}
	}
	return nil
}
