package frontend

import (
	"log/slog"
	"time"

	"github.com/clienttools/gateway/engine"
)

// Options configure what the front ends' Handlers share: their streams,
// and the checks and refusals of their requests; zero fields take their
// defaults.
type Options struct {
	// Logger gets a line per refused request. Default: slog.Default().
	Logger *slog.Logger
	// Buffer is how many frames may wait on a stream's page; default
	// DefaultBuffer. A stream that falls further behind ends with its
	// protocol's error (the AI SDK's error chunk, after which the chat can
	// resume; AG-UI's RUN_ERROR).
	Buffer int
	// WriteTimeout bounds one event's write; default sse.DefaultWriteTimeout
	// (10s). A browser that reads nothing for that long loses the stream
	// (a chat can resume); shorter cuts slow networks off sooner.
	WriteTimeout time.Duration
	// KeepAlive is how often an idle stream gets a comment line, so that
	// proxies which close idle connections (often at 60s) keep it while a
	// tool runs; default DefaultKeepAlive.
	KeepAlive time.Duration
	// Check, when set, checks a request's user message ("" when it has
	// none) and the tools it declares (nil when it declares none) against
	// the limits the session would hold them to, before the handler finds
	// or opens the chat: a request refused for its size opens no session.
	Check func(message string, tools []string) error
	// Refused, when set, is told of each request the handler refuses
	// before its stream starts, with the error it answers (the gateway
	// counts those at a browser's limit).
	Refused func(error)
	// LogRefusal, when set, logs such a refusal (the gateway's bounds what
	// anyone without a cookie can write to its log); else Logger does, at
	// INFO.
	LogRefusal func(msg string, args ...any)
}

// LogRefused logs a request refused before its stream started.
func (o Options) LogRefused(msg string, args ...any) {
	if o.LogRefusal != nil {
		o.LogRefusal(msg, args...)
		return
	}
	o.Logger.Info(msg, args...)
}

// Defaults of Options.
const (
	// DefaultBuffer is Options.Buffer's default, as /ws's send queue.
	DefaultBuffer = engine.DefaultPageBuffer
	// DefaultKeepAlive is Options.KeepAlive's default.
	DefaultKeepAlive = 15 * time.Second
)

// WithDefaults returns o with its zero fields set to their defaults
// (WriteTimeout's is sse.New's).
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	return o
}
