package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/clienttools/gateway/clip"
)

// The approval gate: a tool declared with approval "always" asks the user
// before each call runs. The session publishes tool.approval with the call's
// name, arguments and a digest of them; a page answers tool.approve with
// that digest, once: the first answer wins, and an answer whose digest is
// not this call's (another call's, other arguments) is refused. Approved,
// the call's first attempt starts; denied, it settles denied; unanswered
// within the call's timeout, it settles timeout.

// Wire names of the gate.
const (
	TypeToolApprove   = "tool.approve"  // the page's answer
	EventToolApproval = "tool.approval" // the session asks
	EventToolApproved = "tool.approved" // the answer, for every page
	ApprovalAlways    = "always"
)

// ToolApprove answers a tool.approval.
type ToolApprove struct {
	ID       string `json:"id"`
	Digest   string `json:"digest"`
	Approved bool   `json:"approved"`
}

// ToolApprovalEvent asks the user to approve a call.
type ToolApprovalEvent struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Input     ToolInput `json:"input"`
	Handler   Handler   `json:"handler"`
	Digest    string    `json:"digest"`
	Deadline  string    `json:"deadline"`
}

// ToolApprovedEvent says how a tool.approval was answered, and by which
// page ("" from the Go API).
type ToolApprovedEvent struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	Page     string `json:"page,omitempty"`
}

// approvalDigest binds an approval to its session, call and arguments.
func approvalDigest(session, id, args string) string {
	sum := sha256.Sum256([]byte(session + "\x00" + id + "\x00" + args))
	return hex.EncodeToString(sum[:16])
}

// needsApproval reports whether c asks the user before it runs: its tool
// says so, and it has arguments to run with (bad input or an unknown tool
// fails at once, as without the gate).
func (s *Session) needsApproval(c *call) bool {
	return s.tool(c.name).Approval == ApprovalAlways && c.proposed == nil
}

// askApproval publishes c's tool.approval and waits for the answer until
// the call's timeout.
func (s *Session) askApproval(c *call) {
	c.approving = true
	c.deadline = s.e.opts.Clock.Now().Add(c.spec.timeout)
	s.armApprovalTimeout(c)
	s.publish(EventToolApproval, ToolApprovalEvent{ID: c.id, Name: c.name, Arguments: c.args, Input: c.input, Handler: c.handler,
		Digest: approvalDigest(s.id, c.id, c.args), Deadline: FormatDeadline(c.deadline)})
	s.logger.Info("tool call waits for the user's approval", "call", c.id, "tool", c.name)
}

func (s *Session) armApprovalTimeout(c *call) {
	id := c.id
	c.timer = s.e.opts.Clock.AfterFunc(c.deadline.Sub(s.e.opts.Clock.Now()), func() {
		_ = s.post(context.Background(), func() { s.approvalTimedOut(id) })
	})
}

func (s *Session) approvalTimedOut(id string) {
	c, ok := s.calls[id]
	if !ok || !c.approving || c.settled {
		return
	}
	c.approving = false
	s.settle(c, outcome{code: CodeTimeout, err: fmt.Sprintf("The user did not approve %s within %s, so it did not run.", c.name, c.spec.timeout)}, "")
}

// Approve answers a tool.approval from the Go API.
func (s *Session) Approve(ctx context.Context, a ToolApprove) error {
	return s.do(ctx, func() error { return s.approve(a, nil) })
}

// Approve answers a tool.approval from this page.
func (p *Page) Approve(ctx context.Context, a ToolApprove) error {
	return p.s.do(ctx, func() error {
		p.s.touch(p)
		return p.s.approve(a, p)
	})
}

func (s *Session) approve(a ToolApprove, from *Page) error {
	c, ok := s.lookup(a.ID)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ErrUnknownCall, clip.Quote(a.ID, maxQuotedID))
	case c.run != s:
		return c.run.approve(a, from) // a sub-agent's call
	case !c.approving && !c.settled && !s.needsApproval(c):
		return badRequest("%q does not ask for approval", a.ID)
	case c.settled:
		return fmt.Errorf("%w: %q has settled (answered, denied, timed out or cancelled): an approval counts no more", ErrSettled, a.ID)
	case !c.approving && c.attempt > 0:
		return fmt.Errorf("%w: %q was approved already", ErrSettled, a.ID)
	case !c.approving:
		return fmt.Errorf("%w: %s does not ask for approval", ErrUnknownCall, clip.Quote(a.ID, maxQuotedID))
	case a.Digest != approvalDigest(s.id, c.id, c.args):
		return badRequest("the approval's digest is not %q's: it was given for another call or other arguments", a.ID)
	}
	c.approving = false
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	ev := ToolApprovedEvent{ID: c.id, Approved: a.Approved}
	if from != nil {
		ev.Page = from.id
	}
	s.publish(EventToolApproved, ev)
	if !a.Approved {
		s.settle(c, outcome{code: CodeDenied, err: fmt.Sprintf("The user denied %s, so it did not run. Do not call it again unless they ask for it.", c.name)}, "")
		return nil
	}
	s.startAttempt(c)
	return nil
}
