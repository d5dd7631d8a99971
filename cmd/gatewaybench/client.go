package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"
)

// dialer opens simulated browsers against one server.
type dialer struct {
	base string // http://host:port
	ws   string // ws://host:port/ws
	hc   *http.Client
	// deflate: the gateway's pages offer permessage-deflate and compress
	// every frame they send, as Chromium does (-deflate).
	deflate bool
}

func newDialer(base string, parallel int, deflate bool) *dialer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = parallel // GET / reuses connections instead of churning ports
	return &dialer{base: base, ws: "ws" + strings.TrimPrefix(base, "http") + "/ws", hc: &http.Client{Transport: tr}, deflate: deflate}
}

func (d *dialer) close() { d.hc.CloseIdleConnections() }

// browser is one simulated page with its own cookie and session.
type browser struct {
	ws      *websocket.Conn
	session string
	out     []byte               // the frame being written, reused
	calls   map[string]time.Time // this turn's tool.call arrivals by id
	sent    int                  // messages sent: their ids, as the SDK gives each one
}

// openSession does what a page does: GET / for the cookie, the WebSocket,
// session.open {tools: ["echo"]}; it returns once session.opened arrived.
func (d *dialer) openSession(ctx context.Context) (*browser, error) {
	hdr, err := d.cookie(ctx)
	if err != nil {
		return nil, err
	}
	return d.openSessionAs(ctx, hdr)
}

// cookie does GET / and returns the Cookie header of the browser it made.
func (d *dialer) cookie(ctx context.Context) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/", nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to get the page: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to get the page: %s", resp.Status)
	}
	hdr := http.Header{}
	for _, c := range resp.Cookies() {
		hdr.Add("Cookie", (&http.Cookie{Name: c.Name, Value: c.Value}).String())
	}
	return hdr, nil
}

// openSessionAs opens a new session as the browser whose Cookie header is
// hdr.
func (d *dialer) openSessionAs(ctx context.Context, hdr http.Header) (*browser, error) {
	opts := &websocket.DialOptions{HTTPClient: d.hc, HTTPHeader: hdr}
	if d.deflate {
		opts.CompressionMode, opts.CompressionThreshold = websocket.CompressionNoContextTakeover, 1
	}
	ws, _, err := websocket.Dial(ctx, d.ws, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to open the WebSocket: %w", err)
	}
	ws.SetReadLimit(1 << 20)
	b := &browser{ws: ws, calls: map[string]time.Time{}}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"session.open","tools":["echo"]}`)); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("failed to send session.open: %w", err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("failed to read session.opened: %w", err)
		}
		switch frameType(data) {
		case "session.opened":
			var f struct {
				Session string `json:"session"`
			}
			if err := json.Unmarshal(data, &f); err != nil || f.Session == "" {
				ws.CloseNow()
				return nil, fmt.Errorf("bad session.opened %s", data)
			}
			b.session = f.Session
			return b, nil
		case "error":
			ws.CloseNow()
			return nil, fmt.Errorf("session.open refused: %s", data)
		}
	}
}

// openEcho opens a connection to the echo floor.
func (d *dialer) openEcho(ctx context.Context) (*browser, error) {
	ws, _, err := websocket.Dial(ctx, d.ws, &websocket.DialOptions{HTTPClient: d.hc})
	if err != nil {
		return nil, fmt.Errorf("failed to open the echo WebSocket: %w", err)
	}
	ws.SetReadLimit(1 << 20)
	return &browser{ws: ws}, nil
}

// watch closes the connection when ctx ends, for one exchange: its reads
// and writes take the context it returns, which never ends, and which
// coder/websocket serves without arming and disarming a watch of its own
// around every frame (a quarter of the browsers' CPU under load). A page's
// socket has no such cost. stop ends the watch, and makes *err ctx's error
// when ctx ending is what broke the exchange.
func (b *browser) watch(ctx context.Context) (context.Context, func(*error)) {
	unwatch := context.AfterFunc(ctx, func() { b.ws.CloseNow() })
	return context.WithoutCancel(ctx), func(err *error) {
		if !unwatch() && *err != nil {
			*err = fmt.Errorf("%w (%w)", ctx.Err(), *err)
		}
	}
}

// close ends the connection with a normal close.
func (b *browser) close() { _ = b.ws.Close(websocket.StatusNormalClosure, "") }

// echoFrame is the floor's message: a tool.result of the size the gateway
// gets, so both round trips carry alike frames.
var echoFrame = []byte(`{"type":"tool.result","id":"toolu_1000","attempt":1,"result":{"text":"echo 1000"}}`)

// echo does one round trip on the floor and records it.
func (b *browser) echo(ctx context.Context, rec *recorder) (err error) {
	ctx, stop := b.watch(ctx)
	defer stop(&err)
	sent := time.Now()
	if err := b.ws.Write(ctx, websocket.MessageText, echoFrame); err != nil {
		return err
	}
	_, data, err := b.ws.Read(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if frameType(data) != "tool.result" {
		return fmt.Errorf("the echo server sent %s", data)
	}
	rec.rtt(now, now.Sub(sent))
	return nil
}

// stream has the echo server stream n stamped frames, interval apart, and
// records each one's delay: the floor of the stream phase.
func (b *browser) stream(ctx context.Context, n int, interval time.Duration, rec *recorder) (err error) {
	ctx, stop := b.watch(ctx)
	defer stop(&err)
	if err := b.ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "%s%d %s", streamPrefix, n, interval)); err != nil {
		return err
	}
	for range n {
		_, data, err := b.ws.Read(ctx)
		if err != nil {
			return err
		}
		if err := rec.stamp(time.Now(), data); err != nil {
			return err
		}
	}
	return nil
}

// turn sends one user message and reads until the session.idle that ends
// its turn, answering each tool.call at once with a tool.result that echoes
// the arguments. The turn's idle is the first after a model.finished: an
// idle left over from before the message precedes every model.finished of
// this turn.
func (b *browser) turn(ctx context.Context, content string, rec *recorder) (err error) {
	ctx, stop := b.watch(ctx)
	defer stop(&err)
	b.sent++
	b.out = appendMessage(b.out[:0], content, b.sent)
	sent := time.Now()
	if err := b.ws.Write(ctx, websocket.MessageText, b.out); err != nil {
		return fmt.Errorf("failed to send the message: %w", err)
	}
	var modelDone bool
	clear(b.calls)
	for {
		_, data, err := b.ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("failed to read: %w", err)
		}
		now := time.Now()
		switch frameType(data) {
		case "model.delta":
			if rec.stamped {
				if err := rec.stamp(now, data); err != nil {
					return err
				}
			}
		case "tool.call":
			var f struct {
				ID        string `json:"id"`
				Attempt   int    `json:"attempt"`
				Arguments string `json:"arguments"`
			}
			if err := json.Unmarshal(data, &f); err != nil {
				return fmt.Errorf("bad tool.call %s", data)
			}
			b.calls[f.ID] = now
			b.out = appendToolResult(b.out[:0], f.ID, f.Attempt, f.Arguments)
			if err := b.ws.Write(ctx, websocket.MessageText, b.out); err != nil {
				return fmt.Errorf("failed to send tool.result: %w", err)
			}
		case "tool.finished":
			var f struct {
				ID    string `json:"id"`
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal(data, &f); err != nil {
				return fmt.Errorf("bad tool.finished %s", data)
			}
			if !f.OK {
				rec.fail(fmt.Sprintf("tool.finished not ok: %s", f.Error))
			} else if at, ok := b.calls[f.ID]; ok {
				rec.rtt(now, now.Sub(at))
				delete(b.calls, f.ID)
			}
		case "model.finished":
			modelDone = true
		case "session.idle":
			if modelDone {
				rec.turn(now, now.Sub(sent))
				return nil
			}
		case "error", "tool.cancel", "tool.retrying":
			rec.fail(string(data))
		case "session.ended":
			return fmt.Errorf("the session ended: %s", data)
		}
	}
}

// chat is a browser taking turns, moving to a new session (a new page
// load: GET /, WebSocket, session.open) every sessionTurns turns, as a user
// starts a new chat; 0 keeps one session.
type chat struct {
	d            *dialer
	b            *browser
	sessionTurns int
	turns        int // in the current session
}

// turn takes one turn, first opening a new session when the current one has
// had its turns. The reconnect is not part of the turn's time.
func (c *chat) turn(ctx context.Context, content string, rec *recorder) error {
	if c.sessionTurns > 0 && c.turns >= c.sessionTurns {
		c.b.close()
		b, err := c.d.openSession(ctx)
		if err != nil {
			c.b = nil
			return fmt.Errorf("failed to open the next session: %w", err)
		}
		c.b, c.turns = b, 0
	}
	c.turns++
	err := c.b.turn(ctx, content, rec)
	if websocket.CloseStatus(err) == websocket.StatusCode(engine.CloseElsewhere) {
		// The node lost the session's lease (a starved renewal): a page
		// reconnects; this one starts a new session, and the turn is lost.
		rec.moved++
		c.b.close()
		b, err := c.d.openSession(ctx)
		if err != nil {
			c.b = nil
			return fmt.Errorf("failed to open a session after a 4001: %w", err)
		}
		c.b, c.turns = b, 0
		return nil
	}
	return err
}

// drain reads and discards frames until the connection ends, so pings and
// the close handshake are answered while the session sits idle.
func (b *browser) drain(ctx context.Context) {
	for {
		if _, _, err := b.ws.Read(ctx); err != nil {
			return
		}
	}
}

// frameType is a frame's "type": the gateway writes it first, so this reads
// it without decoding the frame, falling back to decoding.
func frameType(data []byte) string {
	const prefix = `{"type":"`
	if bytes.HasPrefix(data, []byte(prefix)) {
		rest := data[len(prefix):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 {
			return string(rest[:i])
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &head)
	return head.Type
}

// appendMessage is a user message with an id, as the SDK sends it: the
// gateway answers it with message.taken, which the turn ignores.
func appendMessage(b []byte, content string, n int) []byte {
	b = append(b, `{"type":"message","content":`...)
	b = strconv.AppendQuote(b, content)
	b = append(b, `,"id":"m`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, `"}`...)
}

// appendToolResult answers a call with its arguments (a JSON object) as
// the result.
func appendToolResult(b []byte, id string, attempt int, args string) []byte {
	b = append(b, `{"type":"tool.result","id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"result":`...)
	if json.Valid([]byte(args)) {
		b = append(b, args...)
	} else {
		b = strconv.AppendQuote(b, args)
	}
	return append(b, '}')
}

// recorder keeps one browser's samples whose end falls in [from, to); a
// zero window keeps all.
type recorder struct {
	from, to time.Time
	stamped  bool // model.delta texts are stamps
	rtts     samples
	turns    samples
	delays   samples
	failures int
	first    []string // the first few failures, for the report
	total    int      // turns completed, in the window or not
	moved    int      // sessions closed with 4001 (the node lost their lease), reopened
}

func (r *recorder) in(t time.Time) bool {
	return r.from.IsZero() || (!t.Before(r.from) && t.Before(r.to))
}

func (r *recorder) rtt(at time.Time, d time.Duration) {
	if r.in(at) {
		r.rtts = append(r.rtts, d)
	}
}

func (r *recorder) turn(at time.Time, d time.Duration) {
	r.total++
	if r.in(at) {
		r.turns = append(r.turns, d)
	}
}

func (r *recorder) delay(at time.Time, d time.Duration) {
	if r.in(at) {
		r.delays = append(r.delays, d)
	}
}

// stamp records the delay of a model.delta whose text is the
// CLOCK_MONOTONIC stamp of its sending, read as soon as it arrived.
func (r *recorder) stamp(at time.Time, frame []byte) error {
	arrived := monoNow()
	var f struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(frame, &f); err != nil {
		return fmt.Errorf("bad model.delta %s", frame)
	}
	stamp, err := strconv.ParseInt(f.Text, 10, 64)
	if err != nil {
		return fmt.Errorf("model.delta %q has no stamp", f.Text)
	}
	r.delay(at, time.Duration(arrived-stamp))
	return nil
}

func (r *recorder) fail(what string) {
	r.failures++
	if len(r.first) < 3 {
		r.first = append(r.first, what)
	}
}

// merge adds other's samples to r.
func (r *recorder) merge(other *recorder) {
	r.rtts = append(r.rtts, other.rtts...)
	r.turns = append(r.turns, other.turns...)
	r.delays = append(r.delays, other.delays...)
	r.failures += other.failures
	r.total += other.total
	r.moved += other.moved
	for _, f := range other.first {
		if len(r.first) < 3 {
			r.first = append(r.first, f)
		}
	}
}

// err reports protocol failures seen while recording.
func (r *recorder) err() error {
	if r.failures == 0 {
		return nil
	}
	return fmt.Errorf("%d protocol failures, first: %s", r.failures, strings.Join(r.first, " | "))
}

// openMany opens n connections, parallel at a time. On an error it closes
// the ones it opened.
func openMany(ctx context.Context, n, parallel int, open func(context.Context) (*browser, error)) ([]*browser, error) {
	out := make([]*browser, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range out {
		g.Go(func() error {
			b, err := open(gctx)
			out[i] = b
			return err
		})
	}
	if err := g.Wait(); err != nil {
		closeMany(out, parallel)
		return nil, err
	}
	return out, nil
}

// closeMany closes every open connection of bs, parallel at a time.
func closeMany(bs []*browser, parallel int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for _, b := range bs {
		if b == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b.close()
		}()
	}
	wg.Wait()
}

var errNoSamples = errors.New("no samples: does the gateway's model call the client tool echo on each user turn?")
