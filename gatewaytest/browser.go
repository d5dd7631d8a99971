package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Browser is one browser identity: the gateway's cookie, in a jar. Its
// pages share it, as a browser's tabs do.
type Browser struct {
	g      *Gateway
	client *http.Client

	mu    sync.Mutex
	pages []*Page
}

// NewBrowser returns a browser that has loaded the gateway's page, so it
// has its cookie.
func (g *Gateway) NewBrowser(ctx context.Context) (*Browser, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: %w", err)
	}
	b := &Browser{g: g, client: &http.Client{Jar: jar, Transport: &http.Transport{}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/", nil)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: %w", err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: GET /: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("gatewaytest: GET / = %s", resp.Status)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("gatewaytest: the gateway is closed")
	}
	g.browsers = append(g.browsers, b)
	return b, nil
}

// Open opens a page with a new session, declaring tools: the client tools
// the page runs (the gateway delivers their calls to it).
func (b *Browser) Open(ctx context.Context, tools ...string) (*Page, error) {
	return b.open(ctx, "", 0, tools)
}

// Resume opens a page on session, one of this browser's, asking the
// gateway to replay the events after seq after (0: all of them).
func (b *Browser) Resume(ctx context.Context, session string, after int64, tools ...string) (*Page, error) {
	if session == "" {
		return nil, errors.New("gatewaytest: Resume needs a session id")
	}
	return b.open(ctx, session, after, tools)
}

func (b *Browser) open(ctx context.Context, session string, after int64, tools []string) (*Page, error) {
	ws, _, err := websocket.Dial(ctx, b.g.WebSocketURL(), &websocket.DialOptions{HTTPClient: b.client})
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: dial %s: %w", b.g.WebSocketURL(), err)
	}
	ws.SetReadLimit(64 << 20)
	if tools == nil {
		tools = []string{}
	}
	p := &Page{b: b, ws: ws, tools: tools, changed: make(chan struct{}), done: make(chan struct{})}
	b.mu.Lock()
	b.pages = append(b.pages, p)
	b.mu.Unlock()
	go p.read()
	open := map[string]any{"type": "session.open", "tools": tools}
	if session != "" {
		open["session"], open["after"] = session, after
	}
	if err := p.Write(ctx, open); err != nil {
		p.Drop()
		return nil, err
	}
	f, err := p.Wait(ctx, func(f Frame) bool {
		return f.Type == "session.opened" || (f.Type == "error" && f.Seq == 0)
	})
	if err != nil {
		p.Drop()
		return nil, err
	}
	if f.Type == "error" {
		p.Drop()
		return nil, fmt.Errorf("gatewaytest: session.open refused: %s: %s", f.Code, f.Message)
	}
	var opened struct {
		Session string `json:"session"`
		Page    string `json:"page"`
		Seq     int64  `json:"seq"`
	}
	_ = f.Decode(&opened)
	p.Session, p.ID, p.OpenedSeq = opened.Session, opened.Page, opened.Seq
	return p, nil
}

// Record returns every event of session, one of this browser's, as the
// gateway replays it from the start to a new tool-less page: the gateway's
// own record of the session, whatever any page made of it.
func (b *Browser) Record(ctx context.Context, session string) ([]Frame, error) {
	p, err := b.Resume(ctx, session, 0)
	if err != nil {
		return nil, err
	}
	defer p.Drop()
	if p.OpenedSeq > 0 {
		if _, err := p.Wait(ctx, func(f Frame) bool { return f.Seq >= p.OpenedSeq && f.Type != "session.opened" }); err != nil {
			return nil, err
		}
	}
	var events []Frame
	for _, f := range p.Frames() {
		if f.Seq > 0 && f.Seq <= p.OpenedSeq && f.Type != "session.opened" {
			events = append(events, f)
		}
	}
	return events, nil
}

// closeAll closes every page's socket at once, and the browser's idle
// HTTP connections (the gateway is closing).
func (b *Browser) closeAll() {
	b.mu.Lock()
	pages := b.pages
	b.mu.Unlock()
	for _, p := range pages {
		p.Drop()
	}
	b.client.CloseIdleConnections()
}

// Frame is one frame the gateway sent, with the fields tests look at most
// decoded; Decode reads the rest.
type Frame struct {
	Type    string `json:"type"`
	Seq     int64  `json:"seq,omitempty"`
	ID      string `json:"id,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"-"`
	// Raw is the frame as sent.
	Raw json.RawMessage `json:"-"`
}

// Decode unmarshals the whole frame into v.
func (f Frame) Decode(v any) error {
	return json.Unmarshal(f.Raw, v)
}

func (f Frame) String() string { return string(f.Raw) }

// ToolCall is a tool.call the gateway delivered to a page.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // the raw arguments the model wrote
	Input     struct {
		Status string          `json:"status"` // valid, invalid, malformed
		Value  json.RawMessage `json:"value"`
		Error  string          `json:"error"`
	}
	Attempt  int
	Attempts int
	Deadline time.Time
	Frame    Frame
}

// Page is one WebSocket of a browser, with its session: a tab.
type Page struct {
	// Session is the session's id, and ID this connection's page id, from
	// session.opened.
	Session, ID string
	// OpenedSeq is session.opened's seq: the session's last event when the
	// page opened (a resume replays the events after `after` up to it).
	OpenedSeq int64

	b     *Browser
	ws    *websocket.Conn
	tools []string

	mu       sync.Mutex
	frames   []Frame
	taken    map[int]bool // indexes of the tool.calls ToolCall returned
	sentAt   int          // len(frames) when Send last ran
	sentText string       // what it sent
	sent     bool         // Send ran
	readErr  error
	changed  chan struct{} // closed and replaced on every frame
	done     chan struct{} // closed when the socket's reader stops
	dropOnce sync.Once
}

// read is the page's goroutine: it records every frame until the socket
// closes.
func (p *Page) read() {
	defer close(p.done)
	for {
		_, data, err := p.ws.Read(context.Background())
		p.mu.Lock()
		if err != nil {
			p.readErr = err
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			return
		}
		var f Frame
		if json.Unmarshal(data, &f) == nil {
			var m struct {
				Message any `json:"message"`
			}
			_ = json.Unmarshal(data, &m)
			if s, ok := m.Message.(string); ok {
				f.Message = s
			}
			f.Raw = data
			p.frames = append(p.frames, f)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// Frames returns every frame the page received so far, in order.
func (p *Page) Frames() []Frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Frame(nil), p.frames...)
}

// LastSeq is the seq of the last session event the page received.
func (p *Page) LastSeq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.frames) - 1; i >= 0; i-- {
		if p.frames[i].Seq > 0 && p.frames[i].Type != "session.opened" {
			return p.frames[i].Seq
		}
	}
	return 0
}

// Write sends v, any frame, as JSON.
func (p *Page) Write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("gatewaytest: %w", err)
	}
	if err := p.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("gatewaytest: send %s: %w", b, err)
	}
	return nil
}

// Send sends a user message.
func (p *Page) Send(ctx context.Context, text string) error {
	p.mu.Lock()
	p.sentAt, p.sentText, p.sent = len(p.frames), text, true
	p.mu.Unlock()
	return p.Write(ctx, map[string]any{"type": "message", "content": text})
}

// SendOnce sends a user message with id, as the SDK sends every message:
// the gateway takes a message of an id once, however often it comes, and
// answers each copy with message.taken. Faults apply as to an answer:
// Duplicate(2) sends it twice, Delay(d) d later (a page that lost its
// connection meanwhile sends it again on its next one).
func (p *Page) SendOnce(ctx context.Context, id, text string, faults ...Fault) error {
	p.mu.Lock()
	p.sentAt, p.sentText, p.sent = len(p.frames), text, true
	p.mu.Unlock()
	return p.answer(ctx, map[string]any{"type": "message", "content": text, "id": id}, faults)
}

// Cancel stops the session's current turn (the Stop button).
func (p *Page) Cancel(ctx context.Context) error {
	return p.Write(ctx, map[string]any{"type": "cancel"})
}

// Wait returns the first frame, received before or after the call, that
// match accepts.
func (p *Page) Wait(ctx context.Context, match func(Frame) bool) (Frame, error) {
	return p.await(ctx, "a matching frame", 0, func(i int, f Frame) bool { return match(f) })
}

// await runs until match accepts a frame at an index from `from` on.
func (p *Page) await(ctx context.Context, what string, from int, match func(int, Frame) bool) (Frame, error) {
	for {
		p.mu.Lock()
		for i := from; i < len(p.frames); i++ {
			if match(i, p.frames[i]) {
				f := p.frames[i]
				p.mu.Unlock()
				return f, nil
			}
		}
		from = len(p.frames)
		changed, readErr := p.changed, p.readErr
		p.mu.Unlock()
		if readErr != nil {
			return Frame{}, fmt.Errorf("gatewaytest: waiting for %s: the socket closed: %w", what, readErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Frame{}, fmt.Errorf("gatewaytest: waiting for %s: %w; last frames:\n%s", what, ctx.Err(), p.tail())
		}
	}
}

// tail is the page's last frames, for error messages.
func (p *Page) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, f := range p.frames[max(0, len(p.frames)-15):] {
		s := string(f.Raw)
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		b.WriteString("  " + s + "\n")
	}
	return b.String()
}

// ToolCall returns the next tool.call of the tool name that no earlier
// ToolCall of this page returned, received before or after the call.
func (p *Page) ToolCall(ctx context.Context, name string) (ToolCall, error) {
	var hit int
	f, err := p.await(ctx, "a tool.call of "+name, 0, func(i int, f Frame) bool {
		if f.Type != "tool.call" || p.taken[i] {
			return false
		}
		var c struct{ Name string }
		if json.Unmarshal(f.Raw, &c) != nil || c.Name != name {
			return false
		}
		hit = i
		return true
	})
	if err != nil {
		return ToolCall{}, err
	}
	p.mu.Lock()
	if p.taken == nil {
		p.taken = map[int]bool{}
	}
	p.taken[hit] = true
	p.mu.Unlock()
	var c ToolCall
	if err := json.Unmarshal(f.Raw, &c); err != nil {
		return ToolCall{}, fmt.Errorf("gatewaytest: a tool.call that does not decode: %w: %s", err, f.Raw)
	}
	c.Frame = f
	return c, nil
}

// Finished returns the tool.finished event of the call id.
func (p *Page) Finished(ctx context.Context, id string) (Frame, error) {
	return p.Wait(ctx, func(f Frame) bool { return f.Type == "tool.finished" && f.ID == id })
}

// Refusal returns the first `error` frame without seq (the gateway refused
// one of the page's frames) with code.
func (p *Page) Refusal(ctx context.Context, code string) (Frame, error) {
	return p.await(ctx, "a refusal "+code, 0, func(_ int, f Frame) bool { return f.Type == "error" && f.Seq == 0 && f.Code == code })
}

// WaitIdle returns the first session.idle after the `message` event of the
// page's last Send: the turn that message started is over. On a page that
// has not sent, the first session.idle after session.opened's seq: the
// turn under way when it opened is over.
func (p *Page) WaitIdle(ctx context.Context) (Frame, error) {
	p.mu.Lock()
	from, text, sent := p.sentAt, p.sentText, p.sent
	p.mu.Unlock()
	if !sent {
		return p.await(ctx, "session.idle", 0, func(_ int, f Frame) bool { return f.Type == "session.idle" && f.Seq > p.OpenedSeq })
	}
	echoed := false
	return p.await(ctx, "session.idle after the message "+strconv.Quote(text), from, func(_ int, f Frame) bool {
		switch f.Type {
		case "message":
			var m struct {
				Message struct{ Role, Content string }
			}
			if f.Decode(&m) == nil && m.Message.Role == "user" && m.Message.Content == text {
				echoed = true
			}
		case "session.idle":
			return echoed
		}
		return false
	})
}

// A Fault changes how an answer (or a SendOnce message) is sent.
type Fault func(*answer)

type answer struct {
	delay  time.Duration
	copies int
}

// Delay sends the answer d later (or not at all, if ctx ends first).
func Delay(d time.Duration) Fault { return func(a *answer) { a.delay = d } }

// Duplicate sends the answer copies times in a row (2: once more).
func Duplicate(copies int) Fault { return func(a *answer) { a.copies = copies } }

// Answer answers the call's attempt: tool.result {id, attempt, result}.
func (p *Page) Answer(ctx context.Context, call ToolCall, result any, faults ...Fault) error {
	return p.answer(ctx, map[string]any{"type": "tool.result", "id": call.ID, "attempt": call.Attempt, "result": result}, faults)
}

// Failure is a tool.error's content.
type Failure struct {
	Error     string // for the model to read
	Retryable bool   // ask for another attempt under the call's retry policy
	Code      string // one of the TOOL_ERROR codes, or empty
	Detail    any
}

// Fail fails the call's attempt: tool.error {id, attempt, error, ...}.
func (p *Page) Fail(ctx context.Context, call ToolCall, failure Failure, faults ...Fault) error {
	frame := map[string]any{"type": "tool.error", "id": call.ID, "attempt": call.Attempt, "error": failure.Error}
	if failure.Retryable {
		frame["retryable"] = true
	}
	if failure.Code != "" {
		frame["code"] = failure.Code
	}
	if failure.Detail != nil {
		frame["detail"] = failure.Detail
	}
	return p.answer(ctx, frame, faults)
}

func (p *Page) answer(ctx context.Context, frame map[string]any, faults []Fault) error {
	a := answer{copies: 1}
	for _, f := range faults {
		f(&a)
	}
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("gatewaytest: a delayed answer to %v: %w", frame["id"], ctx.Err())
		}
	}
	for range a.copies {
		if err := p.Write(ctx, frame); err != nil {
			return err
		}
	}
	return nil
}

// Drop cuts the connection without a close handshake, as a network does:
// the gateway sees the page go. Safe to call more than once.
func (p *Page) Drop() {
	p.dropOnce.Do(func() { _ = p.ws.CloseNow() })
	<-p.done
}

// Close closes the connection normally (1000), as a closed tab does.
func (p *Page) Close() error {
	var err error
	p.dropOnce.Do(func() { err = p.ws.Close(websocket.StatusNormalClosure, "") })
	<-p.done
	if err != nil && websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		return fmt.Errorf("gatewaytest: close: %w", err)
	}
	return nil
}

// Browser is the browser the page belongs to.
func (p *Page) Browser() *Browser { return p.b }

// Reconnect opens a new page of the same browser on the same session,
// declaring the same tools, with `after` the last seq this page received:
// the gateway replays what it missed and delivers its open calls again.
func (p *Page) Reconnect(ctx context.Context) (*Page, error) {
	return p.b.Resume(ctx, p.Session, p.LastSeq(), p.tools...)
}
