package gateway

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestNodeWatchSeesARestartUnderTheSameName: a node restarted under its
// name answers the watch's question at once, as the process that served
// the pages did, with no gap of "no responders" between (a pod restarted
// in place, quick): only the process its answer names tells them apart.
// The watch has the pipes the old process served check their node at
// once (which moves them), and leaves alone those of the process that
// answers, and those of a node of an earlier version, which names none.
func TestNodeWatchSeesARestartUnderTheSameName(t *testing.T) {
	nc := natsConn(t)
	var answering atomic.Value // the process that answers for node "a" now
	answering.Store("first")
	var asked atomic.Int64
	sub, err := nc.Subscribe(openSubject("a"), func(m *nats.Msg) {
		asked.Add(1)
		_ = m.Respond([]byte(`{"error":"bad request","instance":` + strconv.Quote(answering.Load().(string)) + `}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	r := &Relay{nc: nc, node: "here"}
	served := func(instance string) *pipe {
		p := &pipe{r: r, node: "a", instance: instance, check: make(chan struct{}, 1), stop: make(chan struct{})}
		r.watchNode("a", p)
		return p
	}
	byFirst, earlier := served("first"), served("")
	defer func() {
		for _, p := range []*pipe{byFirst, earlier} {
			r.unwatchNode("a", p)
		}
	}()
	// Questions answered by the process that serves the pipe: no check.
	for n := asked.Load() + 2; asked.Load() < n; time.Sleep(10 * time.Millisecond) {
	}
	for _, p := range []*pipe{byFirst, earlier} {
		select {
		case <-p.check:
			t.Fatalf("a pipe of instance %q checked while its node answered as itself", p.instance)
		default:
		}
	}

	answering.Store("second") // restarted, at once
	select {
	case <-byFirst.check:
	case <-time.After(hang):
		t.Fatal("the pipe of the process that died was not checked")
	}
	for n := asked.Load() + 2; asked.Load() < n; time.Sleep(10 * time.Millisecond) {
	}
	select {
	case <-earlier.check:
		t.Error("a pipe of a node that names no process was checked")
	default:
	}
}
