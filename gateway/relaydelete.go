package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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

// remoteRefusal is a deletion another node refused, as it answers.
type remoteRefusal struct {
	status int
	text   string
}

func (e *remoteRefusal) Error() string   { return e.text }
func (e *remoteRefusal) StatusCode() int { return e.status }

// serveDeletes answers other nodes' deletions of the chats this node
// runs, one at a time, on the subscription's goroutine: deletions are rare,
// and each is over within deleteTimeout.
func (r *Relay) serveDeletes(s *Server) (*nats.Subscription, error) {
	return r.nc.Subscribe(deleteSubject(r.node), func(m *nats.Msg) {
		var req relayDelete
		var ans relayDeleted
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Session == "" || req.Browser == "" {
			ans = relayDeleted{Status: http.StatusBadRequest, Error: "bad request"}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
			if err := s.opts.Engine.Delete(ctx, req.Session, req.Browser); err != nil {
				status, err := deleteStatus(req.Session, err)
				ans = relayDeleted{Status: status, Error: err.Error()}
			} else {
				s.logger.Info("chat deleted", "session", req.Session, "for", "another node")
			}
			cancel()
		}
		answer, _ := json.Marshal(ans)
		_ = m.Respond(answer)
	})
}

// askDelete asks node, which runs session, to delete it for browser.
func (r *Relay) askDelete(ctx context.Context, node, session, browser string) error {
	req, err := json.Marshal(relayDelete{Session: session, Browser: browser})
	if err != nil {
		return err
	}
	m, err := r.nc.RequestWithContext(ctx, deleteSubject(node), req)
	if err != nil {
		return &remoteRefusal{status: http.StatusServiceUnavailable,
			text: fmt.Sprintf("chat %q runs on gateway node %s, which did not answer its deletion (%v): retry", session, node, err)}
	}
	var ans relayDeleted
	if err := json.Unmarshal(m.Data, &ans); err != nil {
		return &remoteRefusal{status: http.StatusBadGateway, text: fmt.Sprintf("gateway node %s answered the deletion of chat %q with no answer this node reads: %v", node, session, err)}
	}
	if ans.Status == 0 {
		return nil
	}
	return &remoteRefusal{status: ans.Status, text: ans.Error}
}
