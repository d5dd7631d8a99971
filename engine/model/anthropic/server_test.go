package anthropic

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/engine/model/internal/fakeapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-ant-test-secret"

// The fake Messages API (see fakeapi): scripted replies, recorded
// requests, and recorded waits between attempts.
type (
	reply   = fakeapi.Reply
	server  = fakeapi.Server
	sleeper = fakeapi.Sleeper
)

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	return fakeapi.NewServer(t, "/v1/messages", replies...)
}

// newModel builds a Model against srv with a recording sleeper.
func newModel(t *testing.T, srv *server, opts Options) (*Model, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	opts.BaseURL = srv.URL
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

// SSE frames in the shapes the Messages API documents.

func sse(event, data string) string { return "event: " + event + "\ndata: " + data + "\n\n" }

func messageStart(inputTokens int) string {
	return sse("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+itoa(inputTokens)+`,"output_tokens":1}}}`)
}

func textStart(index int) string {
	return sse("content_block_start", `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"text","text":""}}`)
}

func textDelta(index int, text string) string {
	return sse("content_block_delta", `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"text_delta","text":`+quote(text)+`}}`)
}

func toolStart(index int, id, name, input string) string {
	return sse("content_block_start", `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"tool_use","id":`+quote(id)+`,"name":`+quote(name)+`,"input":`+input+`}}`)
}

func jsonDelta(index int, partial string) string {
	return sse("content_block_delta", `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"input_json_delta","partial_json":`+quote(partial)+`}}`)
}

func blockStop(index int) string {
	return sse("content_block_stop", `{"type":"content_block_stop","index":`+itoa(index)+`}`)
}

func ping() string { return sse("ping", `{"type": "ping"}`) }

func messageDelta(stop string, outputTokens int) string {
	return sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+quote(stop)+`,"stop_sequence":null},"usage":{"output_tokens":`+itoa(outputTokens)+`}}`)
}

func messageStop() string { return sse("message_stop", `{"type":"message_stop"}`) }

func errorEvent(kind, message string) string {
	return sse("error", `{"type":"error","error":{"type":`+quote(kind)+`,"message":`+quote(message)+`}}`)
}

func errorBody(kind, message string) string {
	return `{"type":"error","error":{"type":` + quote(kind) + `,"message":` + quote(message) + `},"request_id":"req_011"}`
}

// textTurn is a whole turn that says parts, one delta each.
func textTurn(parts ...string) []string {
	evs := []string{messageStart(10), textStart(0), ping()}
	for _, p := range parts {
		evs = append(evs, textDelta(0, p))
	}
	return append(evs, blockStop(0), messageDelta("end_turn", 5), messageStop())
}

var (
	itoa  = fakeapi.Itoa
	quote = fakeapi.Quote
)
