package gateway_test

// Benchmarks of the gateway's hot paths. They report time and allocations
// only; the figures live in docs/benchmarks.md, never in assertions.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/alexedwards/scs/v2/memstore"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// BenchmarkDecodeFrame decodes the frames a browser sends; tool.result is
// the one every client call costs.
func BenchmarkDecodeFrame(b *testing.B) {
	frames := []struct{ name, data string }{
		{"tool.result", `{"type":"tool.result","id":"toolu_1000","attempt":1,"result":{"text":"echo 1000"}}`},
		{"tool.error", `{"type":"tool.error","id":"toolu_1000","attempt":1,"error":"the user closed the dialog","retryable":true}`},
		{"message", `{"type":"message","content":"what's the weather in Tokyo"}`},
		{"session.open", `{"type":"session.open","session":"abcdefghijklmnopqrst","after":42,"tools":["echo","get_local_time"]}`},
	}
	for _, f := range frames {
		b.Run(f.name, func(b *testing.B) {
			data := []byte(f.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := gateway.DecodeFrame(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClientToolTurn is one whole turn over a real WebSocket on
// loopback, browser and gateway in this process: message, the model calls
// the client tool echo, the browser answers the tool.call at once, the
// model replies, session.idle. Allocations count both sides.
// cmd/gatewaybench measures the same turn with the two in separate
// processes.
//
// A session takes benchSessionTurns turns, then the browser opens a new one
// (untimed): the engine copies the whole transcript into every model
// request, so a turn costs more the longer its session is, and one session
// for all b.N turns would make ns/op depend on b.N.
//
// deflate: the browser negotiates permessage-deflate and compresses each
// frame it sends, as Chromium does; the gateway (Options.CompressOver
// 1024) compresses none of the turn's frames, each under 1 KiB, and
// writes every frame on the page's writer goroutine.
func BenchmarkClientToolTurn(b *testing.B) {
	for _, deflate := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "deflate"}[deflate], func(b *testing.B) {
			const benchSessionTurns = 50
			base := benchGateway(b)
			ctx := context.Background()
			var ws *websocket.Conn
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%benchSessionTurns == 0 {
					b.StopTimer()
					if ws != nil {
						_ = ws.Close(websocket.StatusNormalClosure, "")
					}
					ws = benchDial(b, base, deflate)
					b.StartTimer()
				}
				benchTurn(b, ctx, ws, "echo "+strconv.Itoa(i))
			}
			b.StopTimer()
			_ = ws.Close(websocket.StatusNormalClosure, "")
		})
	}
}

// benchModel calls echo on every user turn and replies "done" after the
// result.
var benchModel = model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		onDelta("done")
		return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
	}
	args, _ := json.Marshal(map[string]string{"text": last.Content})
	id := "toolu_" + strconv.Itoa(len(req.Messages))
	return model.Response{ToolUses: []model.ToolUse{{ID: id, Name: "echo", Arguments: string(args)}}, StopReason: model.StopToolUse}, nil
})

// benchGateway starts a gateway on an httptest server and returns its URL.
// Everything stops with the benchmark.
func benchGateway(b *testing.B) string {
	b.Helper()
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(engine.Options{
		Worker: &engine.ToolWorker{Agent: engine.AgentConfig{Model: "bench", Stream: true, Tools: []engine.AgentTool{{
			Name:    "echo",
			Input:   engine.Schema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Handler: engine.HandlerClient,
		}}}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return benchModel, nil }),
		Logger: logger,
	})
	if err != nil {
		b.Fatal(err)
	}
	// scs's default memstore starts a cleanup goroutine that gateway
	// Shutdown does not stop (nor does gateway.New's default): stop it here.
	sessions := scs.New()
	b.Cleanup(sessions.Store.(*memstore.MemStore).StopCleanup)
	// Compression on, as an operator may turn it; only the deflate
	// browsers negotiate it.
	gw, err := gateway.New(gateway.Options{Engine: eng, Sessions: sessions, Logger: logger, PingInterval: -1, CompressOver: 1024})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close()
		if err := gw.Shutdown(ctx); err != nil {
			b.Error(err)
		}
		if err := eng.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return srv.URL
}

// benchDial does what a page does: GET / for the cookie, the WebSocket,
// session.open declaring echo; it returns once session.opened arrived.
func benchDial(b *testing.B, base string, deflate bool) *websocket.Conn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/")
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	header := http.Header{}
	for _, c := range resp.Cookies() {
		header.Add("Cookie", c.Name+"="+c.Value)
	}
	opts := &websocket.DialOptions{HTTPClient: client, HTTPHeader: header}
	if deflate {
		opts.CompressionMode, opts.CompressionThreshold = websocket.CompressionNoContextTakeover, 1
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ws.CloseNow() })
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"session.open","tools":["echo"]}`)); err != nil {
		b.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var f struct{ Type string }
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		switch f.Type {
		case "session.opened":
			return ws
		case "error":
			b.Fatalf("session.open: %s", data)
		}
	}
}

// benchMessages numbers the benchmarks' messages.
var benchMessages atomic.Int64

// benchTurn sends content and reads until the turn's session.idle (the
// first after a model.finished), answering the tool.call with its
// arguments.
func benchTurn(b *testing.B, ctx context.Context, ws *websocket.Conn, content string) {
	// With an id, as the SDK sends a message: the turn also brings its
	// message.taken.
	msg, _ := json.Marshal(map[string]string{"type": "message", "content": content, "id": fmt.Sprintf("m%d", benchMessages.Add(1))})
	if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	modelDone := false
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var f struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			Attempt   int    `json:"attempt"`
			Arguments string `json:"arguments"`
			OK        bool   `json:"ok"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		switch f.Type {
		case "tool.call":
			answer, _ := json.Marshal(map[string]any{"type": "tool.result", "id": f.ID, "attempt": f.Attempt, "result": json.RawMessage(f.Arguments)})
			if err := ws.Write(ctx, websocket.MessageText, answer); err != nil {
				b.Fatal(err)
			}
		case "tool.finished":
			if !f.OK {
				b.Fatalf("call failed: %s", data)
			}
		case "model.finished":
			modelDone = true
		case "session.idle":
			if modelDone {
				return
			}
		case "error", "session.ended":
			b.Fatalf("unexpected %s", data)
		}
	}
}
