package gatewaytest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/gatewaytest"
)

// A gateway with a script of your own, and a test browser that answers the
// client tool the script calls. In a test, gatewaytest.Start(t, options)
// does New and Close.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := gatewaytest.New(ctx, gatewaytest.Options{Script: &scripted.Script{
		Rules: []scripted.Rule{{Match: "(?i)time", Tools: []scripted.ToolCall{{Name: "get_local_time"}}}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)

	browser, err := g.NewBrowser(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := browser.Open(ctx, "get_local_time") // the client tools this page runs
	if err != nil {
		log.Fatal(err)
	}
	if err := page.Send(ctx, "What time is it?"); err != nil {
		log.Fatal(err)
	}
	call, err := page.ToolCall(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(call.Name, "attempt", call.Attempt, "of", call.Attempts)
	if err := page.Answer(ctx, call, map[string]string{"time": "12:00", "timeZone": "UTC"}); err != nil {
		log.Fatal(err)
	}
	finished, err := page.Finished(ctx, call.ID)
	if err != nil {
		log.Fatal(err)
	}
	var f struct {
		OK     bool
		Result string
	}
	if err := finished.Decode(&f); err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.OK, f.Result)
	// Output:
	// get_local_time attempt 1 of 1
	// true {"time":"12:00","timeZone":"UTC"}
}

// The connection drops while the call waits in the page; the page resumes
// with `after`, and the gateway delivers the same attempt again.
func ExamplePage_Reconnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := gatewaytest.New(ctx, gatewaytest.Options{}) // the demo script: "what time is it" calls get_local_time
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	browser, err := g.NewBrowser(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := browser.Open(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}
	if err := page.Send(ctx, "what time is it"); err != nil {
		log.Fatal(err)
	}
	first, err := page.ToolCall(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}

	page.Drop() // mid-call, as a network does
	again, err := page.Reconnect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	redelivered, err := again.ToolCall(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same call:", redelivered.ID == first.ID, "same attempt:", redelivered.Attempt == first.Attempt)
	// Output: same call: true same attempt: true
}

// A duplicated answer: the gateway takes the first and refuses the copy
// with "settled"; the call settles once.
func ExampleDuplicate() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := gatewaytest.New(ctx, gatewaytest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	browser, err := g.NewBrowser(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := browser.Open(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}
	if err := page.Send(ctx, "what time is it"); err != nil {
		log.Fatal(err)
	}
	call, err := page.ToolCall(ctx, "get_local_time")
	if err != nil {
		log.Fatal(err)
	}
	if err := page.Answer(ctx, call, map[string]string{"time": "12:00", "timeZone": "UTC"}, gatewaytest.Duplicate(2)); err != nil {
		log.Fatal(err)
	}
	refused, err := page.Refusal(ctx, "settled")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("refused:", refused.Code)
	// Output: refused: settled
}
