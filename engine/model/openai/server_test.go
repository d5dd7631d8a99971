package openai

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-proj-test-secret"

// The fake Chat Completions API (see fakeapi): scripted replies, recorded
// requests, and recorded waits between attempts.
type (
	reply   = fakeapi.Reply
	server  = fakeapi.Server
	sleeper = fakeapi.Sleeper
)

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	return fakeapi.NewServer(t, "/v1/chat/completions", replies...)
}

// newModel builds a Model against srv with a recording sleeper.
func newModel(t *testing.T, srv *server, opts Options) (*Model, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	opts.BaseURL = srv.URL + "/v1"
	opts.HTTPClient = srv.Client()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, sl
}

// SSE frames in the shapes Chat Completions documents.

func data(payload string) string { return "data: " + payload + "\n\n" }

func done() string { return data("[DONE]") }

// chunk wraps one choice delta in a chat.completion.chunk.
func chunk(delta, finish string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = quote(finish)
	}
	return data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-test","system_fingerprint":"fp_1","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}`)
}

func roleChunk() string { return chunk(`{"role":"assistant","content":""}`, "") }

func textChunk(text string) string { return chunk(`{"content":`+quote(text)+`}`, "") }

func finishChunk(reason string) string { return chunk(`{}`, reason) }

func usageChunk(prompt, completion int) string {
	return data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":` + itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `,"total_tokens":` + itoa(prompt+completion) + `}}`)
}

// callStart is a tool call's first fragment: index, id, name.
func callStart(index int, id, name string) string {
	return chunk(`{"tool_calls":[{"index":`+itoa(index)+`,"id":`+quote(id)+`,"type":"function","function":{"name":`+quote(name)+`,"arguments":""}}]}`, "")
}

// callArgs is a later fragment: more of the arguments.
func callArgs(index int, args string) string {
	return chunk(`{"tool_calls":[{"index":`+itoa(index)+`,"function":{"arguments":`+quote(args)+`}}]}`, "")
}

func errorChunk(message string) string {
	return data(`{"error":{"message":` + quote(message) + `,"type":"server_error","param":null,"code":null}}`)
}

func errorBody(message string) string {
	return `{"error":{"message":` + quote(message) + `,"type":"invalid_request_error","param":null,"code":null}}`
}

// textTurn is a whole turn that says parts, one chunk each.
func textTurn(parts ...string) []string {
	evs := []string{roleChunk()}
	for _, p := range parts {
		evs = append(evs, textChunk(p))
	}
	return append(evs, finishChunk("stop"), usageChunk(9, 12), done())
}

var (
	itoa  = fakeapi.Itoa
	quote = fakeapi.Quote
)
