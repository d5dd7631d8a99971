package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clienttools/gateway/engine"
	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
)

// A NATS client that was away from its server (the server died, or the
// network to it dropped) comes back with its subscriptions, but core NATS
// kept nothing published for them meanwhile, and says nothing of it. An
// event shows such a gap by its seq; a tool.call, a message.taken or a
// page's answer carries none, and a lost one would show only when its
// attempt timed out. So each side of a pipe counts the messages it
// publishes on its direction and those it reads on the other, and a node
// whose client is connected again asks the other side of each of its pipes
// to compare: a sync, a message with the header Gateway-Sync "ask <n>" or
// "answer <n>", n the messages its sender published on that direction of
// the pipe before it. The side that reads a sync compares n with what it
// read before it on the same subscription, in order: fewer means messages
// were lost, and the page is closed with 1008, to resume from its last
// event and send again what the session did not confirm. An ask is
// answered, so the other direction is compared too. A sync is published
// under the lock its side's frames are, never between the parts of one.
// Nodes say in the open's request and answer that they take syncs: one of
// an earlier version would take a sync for a frame.
const syncHeader = "Gateway-Sync"

// The kinds of sync.
const (
	syncAsk    = "ask"
	syncAnswer = "answer"
)

// syncMsg is a sync of kind on subj, after sent messages.
func syncMsg(subj, kind string, sent uint64) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Header.Set(syncHeader, kind+" "+strconv.FormatUint(sent, 10))
	return m
}

// readSync reads a sync's header h: its kind, and whether what came before
// it is whole: got, the messages read before it, is what it says was sent.
func readSync(h string, got uint64) (kind string, whole bool, err error) {
	kind, n, _ := strings.Cut(h, " ")
	sent, err := strconv.ParseUint(n, 10, 64)
	if err != nil || (kind != syncAsk && kind != syncAnswer) {
		return "", false, fmt.Errorf("a relay sync %q", h)
	}
	return kind, sent == got, nil
}

// comeBack has every pipe of this node's, both ways, compared each time
// the NATS client is connected again after it was away, until back is
// closed (stop).
func (r *Relay) comeBack(s *Server, back chan nats.Status) {
	defer r.watching.Done()
	for range back {
		asked := 0
		for _, c := range s.relayedConns() {
			if c.ws.(*remoteSocket).ask() {
				asked++
			}
		}
		r.mu.Lock()
		own := make([]*pipe, 0, len(r.pipes))
		for p := range r.pipes {
			own = append(own, p)
		}
		r.mu.Unlock()
		for _, p := range own {
			if p.ask() {
				asked++
			}
		}
		if asked > 0 {
			s.logger.Info("connected to NATS again: relayed pages checked for lost frames", "pipes", asked)
		}
	}
}

// addPipe counts p among this node's relayed pages, until removePipe.
func (r *Relay) addPipe(p *pipe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pipes == nil {
		r.pipes = map[*pipe]struct{}{}
	}
	r.pipes[p] = struct{}{}
}

func (r *Relay) removePipe(p *pipe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pipes, p)
}

// ask sends the page's node a sync ask, when it takes syncs; it reports
// whether it did.
func (s *remoteSocket) ask() bool {
	return s.sync && s.publishSync(syncAsk)
}

// publishSync sends the page's node a sync of kind after what Write sent.
func (s *remoteSocket) publishSync(kind string) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.closed:
		return false
	default:
	}
	return s.nc.PublishMsg(syncMsg(s.pipe+".out", kind, s.sent)) == nil
}

// readSync takes a sync from the page's node: false when frames from it
// were lost (the page is closed with 1008).
func (s *remoteSocket) readSync(h string) bool {
	kind, whole, err := readSync(h, s.got)
	if err != nil || !whole {
		s.logger.Warn("relayed page's frames were lost while a node was away from NATS, closing", "got", s.got, "sync", h, "err", err)
		_ = s.Close(websocket.StatusCode(engine.CloseTooSlow), reasonFramesLost)
		return false
	}
	if kind == syncAsk {
		s.publishSync(syncAnswer)
	}
	return true
}

// ask sends the serving node a sync ask, when it takes syncs and the page
// is on it; it reports whether it did.
func (p *pipe) ask() bool {
	return p.publishSync("", syncAsk)
}

// publishSync sends the serving node of pipe id ("": the current one) a
// sync of kind, after what send sent, unless the page moved or ended.
func (p *pipe) publishSync(id, kind string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.sync || p.moving || p.ended || p.id == "" || (id != "" && id != p.id) {
		return false
	}
	return p.r.nc.PublishMsg(syncMsg(p.id+".in", kind, p.sent)) == nil
}

// pipeIn is what the page's node reads of one pipe: the messages read, and
// the frame being joined. Only the pipe's subscription uses it.
type pipeIn struct {
	joiner frameJoiner
	got    uint64
}

// readSync takes a sync from the serving node of pipe id, and closes the
// page with 1008 when frames from it were lost.
func (p *pipe) readSync(id string, in *pipeIn, h string) {
	kind, whole, err := readSync(h, in.got)
	switch {
	case err != nil || !whole:
		p.lost("relayed page's frames were lost while a node was away from NATS, closing", "got", in.got, "sync", h, "err", err)
	case kind == syncAsk:
		p.publishSync(id, syncAnswer)
	}
}
