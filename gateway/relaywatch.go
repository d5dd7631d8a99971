package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// The relay's watch of the nodes that serve this node's pages: one
// question a second to each (nodeCheck), and, while one is silent, a read
// of its pages' leases (leftBehind). The watches' goroutines are the
// relay's, each stopped with its last pipe (unwatchNode).

// nodeWatch asks a node that serves pages of this node's whether it is
// there, every nodeCheck, while it serves any: a node that died has no
// subscriptions left ("no responders"), and the pipes to it check at once
// and move, where each alone checks its node every --ping-interval (20 s
// by default, longer than a lease). One a node, whatever its pages.
type nodeWatch struct {
	pipes map[*pipe]struct{}
	stop  chan struct{}
}

// nodeCheck is how often a nodeWatch asks: a second, against the lease's
// seconds, so a relayed page moves soon after its dead node's lease
// expired.
const nodeCheck = time.Second

// watchNode counts p among node's pipes, and starts watching node with
// the first.
func (r *Relay) watchNode(node string, p *pipe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.nodes[node]
	if w == nil {
		if r.nodes == nil {
			r.nodes = map[string]*nodeWatch{}
		}
		w = &nodeWatch{pipes: map[*pipe]struct{}{}, stop: make(chan struct{})}
		r.nodes[node] = w
		go r.runWatch(node, w)
	}
	w.pipes[p] = struct{}{}
}

// unwatchNode takes p from node's pipes, and stops watching node after the
// last.
func (r *Relay) unwatchNode(node string, p *pipe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.nodes[node]
	if w == nil {
		return
	}
	delete(w.pipes, p)
	if len(w.pipes) == 0 {
		close(w.stop)
		delete(r.nodes, node)
	}
}

// runWatch asks node every nodeCheck until w stops. The question is an
// empty request to serve a page, which every version of the gateway
// refuses at once: any answer is a node that is there.
func (r *Relay) runWatch(node string, w *nodeWatch) {
	t := time.NewTicker(nodeCheck)
	defer t.Stop()
	answered := "" // the process that answered last: its pipes are read once
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), nodeCheck)
		resp, err := r.nc.RequestWithContext(ctx, openSubject(node), nil)
		cancel()
		switch {
		case err == nil:
			// There; but a node restarted under its name (a pod's, a
			// service's) answers too, and serves none of the pipes of
			// the process that died.
			var answer struct{ Instance string }
			_ = json.Unmarshal(resp.Data, &answer)
			if answer.Instance != answered {
				answered = answer.Instance
				r.checkPipes(node, w, func(p *pipe) bool { return answered != "" && p.instance != "" && p.instance != answered })
			}
		case !errors.Is(err, nats.ErrNoResponders):
			r.leftBehind(node, w) // silent: slow, or hung
		default:
			r.checkPipes(node, w, func(*pipe) bool { return true })
		}
	}
}

// checkPipes has those of w's pipes still on node that need it ping their
// serving node at once: one that does not answer moves the page (watch).
func (r *Relay) checkPipes(node string, w *nodeWatch, need func(p *pipe) bool) {
	for _, p := range r.pipesOf(w) { // p.mu is taken before r.mu, never inside it
		p.mu.Lock()
		check := p.node == node && need(p)
		p.mu.Unlock()
		if check {
			select {
			case p.check <- struct{}{}:
			default:
			}
		}
	}
}

// pipesOf lists w's pipes now, for a walk that takes each pipe's lock:
// p.mu is taken before r.mu, never inside it.
func (r *Relay) pipesOf(w *nodeWatch) []*pipe {
	r.mu.Lock()
	defer r.mu.Unlock()
	pipes := make([]*pipe, 0, len(w.pipes))
	for p := range w.pipes {
		pipes = append(pipes, p)
	}
	return pipes
}

// leftBehind moves w's pages whose session node no longer runs: node is
// silent (a hung process, a partition: a dead one says "no responders" at
// once), its lease expired, and another node, this one included, took the
// session over, or will once the page moves. The pages would otherwise
// wait for their own pings, --ping-interval, while their calls time out. A
// node only slow to answer still holds its leases: its pages stay. One
// read of a lease a session, each nodeCheck, while node is silent.
func (r *Relay) leftBehind(node string, w *nodeWatch) {
	runs := map[string]string{} // by session: the node that holds it, "" none or this one
	for _, p := range r.pipesOf(w) {
		select {
		case <-w.stop:
			return // no page of this node's on node any more
		default:
		}
		p.mu.Lock()
		pipeID, on := p.id, p.node == node
		p.mu.Unlock()
		if !on {
			continue // moved meanwhile
		}
		id := p.open.Session
		holder, asked := runs[id]
		if !asked {
			ctx, cancel := context.WithTimeout(context.Background(), nodeCheck)
			var err error
			holder, err = p.c.s.opts.Engine.RunsElsewhere(ctx, id)
			cancel()
			if err != nil {
				continue // the store cannot say now: asked again next time
			}
			runs[id] = holder
		}
		if holder != node {
			p.moveSoon("its node is silent, and no longer runs the session", true, pipeID)
		}
	}
}
