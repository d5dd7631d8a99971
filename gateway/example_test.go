package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/gateway"
	"github.com/clienttools/gateway/static"
	"github.com/clienttools/gateway/web"
)

// A Go program that embeds the gateway, as cmd/gateway does with all its
// flags: an agent whose tools are Go functions (engine.ToolWorker; an
// httpworker.Worker for a worker over HTTP), the models (here the offline
// demo script; providers.New for Claude and OpenAI by their API keys), a
// store (engine.NewMemoryStore, or store/jetstream's for chats that outlive
// the process, then Engine.Resume at start), the engine, and the gateway's
// handler, with the chat page at / and the SDK under /static/ (any page of
// yours as Page, or none). It stops with ShutdownServer, then Engine.Close.
func ExampleNew() {
	models := model.ResolverFunc(func(id string) (model.Model, error) { return scripted.New(scripted.Demo()) })
	eng, err := engine.New(engine.Options{
		Worker: &engine.ToolWorker{Agent: engine.AgentConfig{Model: "demo"}, Tools: []engine.Tool{demo.GetWeather}},
		Models: models,
		Store:  engine.NewMemoryStore(),
	})
	if err != nil {
		log.Fatal(err)
	}
	page, err := web.Handler(web.PageProps{AssetVersion: static.Version()})
	if err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{
		Engine: eng,
		Page:   page,
		Static: static.FS,
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Println(resp.Status, strings.TrimSpace(string(body)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.ShutdownServer(ctx, srv); err != nil {
		log.Fatal(err)
	}
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 OK {"connections":0,"sessions":0,"status":"ok","streams":0}
}
