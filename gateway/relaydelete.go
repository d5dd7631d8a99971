package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
)

// The relay's deletions: a node asked to delete a chat another node runs
// (DELETE /sessions/{id}) asks that node, on gateway.relay.<node>.delete,
// which deletes it as its own request would (engine.Delete).

func deleteSubject(node string) string { return "gateway.relay." + node + ".delete" }

type relayDelete struct {
	Session string `json:"session"`
	Browser string `json:"browser"`
}

// relayDeleted is the answer: no status, deleted; else the answer the
// asking node gives its browser.
type relayDeleted struct {
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// maxRelayedDeletes bounds the other nodes' deletions this node runs at
// once: one whose session ends slowly holds up no other.
const maxRelayedDeletes = 8

// serveDeletes answers other nodes' deletions of the chats this node
// runs, each on a goroutine of its own (at most maxRelayedDeletes at once),
// which stop cancels and waits for.
func (r *Relay) serveDeletes(s *Server) (*nats.Subscription, error) {
	ctx, cancel := context.WithCancel(context.Background())
	slots := make(chan struct{}, maxRelayedDeletes)
	sub, err := r.nc.Subscribe(deleteSubject(r.node), func(m *nats.Msg) {
		var req relayDelete
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Session == "" || req.Browser == "" {
			answer, _ := json.Marshal(relayDeleted{Status: http.StatusBadRequest, Error: "bad request"})
			_ = m.Respond(answer)
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r.mu.Lock() // stop cancels ctx under it, then waits for deletes
		if ctx.Err() != nil {
			r.mu.Unlock()
			<-slots
			return
		}
		r.deletes.Add(1)
		r.mu.Unlock()
		go func() {
			defer func() { <-slots; r.deletes.Done() }()
			dctx, done := context.WithTimeout(ctx, deleteTimeout)
			defer done()
			var ans relayDeleted
			if err := s.opts.Engine.Delete(dctx, req.Session, req.Browser); err != nil {
				status, err := deleteStatus(req.Session, err)
				ans = relayDeleted{Status: status, Error: err.Error()}
			} else {
				s.logger.Info("chat deleted", "session", req.Session, "for", "another node")
			}
			answer, _ := json.Marshal(ans)
			_ = m.Respond(answer)
		}()
	})
	if err != nil {
		cancel()
		return nil, err
	}
	r.stopDeletes = cancel
	return sub, nil
}

// relayDeleteTimeout bounds the wait for another node's deletion: one
// takes milliseconds (the session's end, a purge), and a node that died
// while it deleted never answers: the browser is told to retry within
// this, not after deleteTimeout.
const relayDeleteTimeout = 15 * time.Second

// askDelete asks node, which runs session, to delete it for browser.
func (r *Relay) askDelete(ctx context.Context, node, session, browser string) error {
	req, err := json.Marshal(relayDelete{Session: session, Browser: browser})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, relayDeleteTimeout)
	defer cancel()
	m, err := r.nc.RequestWithContext(ctx, deleteSubject(node), req)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &chatError{status: http.StatusServiceUnavailable,
			err: fmt.Errorf("chat %q runs on gateway node %s, which takes no deletions: it runs an earlier version of the gateway (retry once it is upgraded), or it stopped (retry once its lease has expired)", session, node)}
	case err != nil:
		return &chatError{status: http.StatusServiceUnavailable,
			err: fmt.Errorf("chat %q runs on gateway node %s, which did not answer its deletion (%v): retry", session, node, err)}
	}
	var ans relayDeleted
	if err := json.Unmarshal(m.Data, &ans); err != nil {
		return &chatError{status: http.StatusBadGateway, err: fmt.Errorf("gateway node %s answered the deletion of chat %q with no answer this node reads: %v", node, session, err)}
	}
	if ans.Status == 0 {
		return nil
	}
	return &chatError{status: ans.Status, err: errors.New(ans.Error)} // as that node answers its browsers
}
