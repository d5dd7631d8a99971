package frontend

import (
	"context"
	"errors"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/sse"
)

// A Stream is one response in an adapter's protocol: what each frame
// means on the wire, and how the response ends.
type Stream interface {
	// Event writes what one frame of the page means.
	Event(ctx context.Context, page *engine.Page, ev engine.Event)
	// Ended reports whether the response is over.
	Ended() bool
	// End ends the response, for the reason why; pending names the calls
	// it waits on (EndPending only).
	End(why End, pending []string)
}

// End is why a Pump ends a response.
type End int

const (
	EndPending  End = iota // it waits only on client calls this stream delivered
	EndIdle                // it had nothing to do, and nothing happened since the last one
	EndClosed              // the page closed: the session ended
	EndSlow                // the page fell behind the session and was dropped
	EndStopping            // the gateway stops (ErrStopping): the reply is cut
)

// ErrStopping is the cause a response's context is cancelled with when the
// gateway stops: the response ends with its protocol's error, so the app
// knows the reply was cut rather than taking what it has for all of it.
var ErrStopping = errors.New("the gateway is stopping")

// Pump drives one response from a page.
type Pump struct {
	SSE       *sse.Writer   // the response's events; a broken one ends it
	KeepAlive time.Duration // how often an idle response gets a comment line
	Calls     *Calls        // the response's calls, which its Stream notes
	Input     bool          // the request gave the session something to do
}

// Run hands the Stream the frames of replay (taken from the page already;
// nil: none), then the page's, until the response ends or ctx does (the
// browser left; or the gateway stops, ErrStopping its cause, and the
// Stream ends with EndStopping). When the page's queue is empty
// after a batch, the response ends if it waits only on pending calls, or,
// after the first batch, if the session is as the last response left it.
func (p Pump) Run(ctx context.Context, page *engine.Page, replay []engine.Event, s Stream) {
	keepalive := time.NewTicker(p.KeepAlive)
	defer keepalive.Stop()
	frames := replay
	var buf []engine.Event
	first := true
	for !s.Ended() {
		if p.SSE.Err() != nil {
			return // the browser stopped reading
		}
		if errors.Is(context.Cause(ctx), ErrStopping) {
			// Between batches too: a page that streams without a pause
			// never reaches the select below.
			s.End(EndStopping, nil)
			return
		}
		if frames == nil {
			buf = page.Take(buf)
			frames = buf
		}
		news := false
		for _, ev := range frames {
			news = news || ev.Seq > 0
			s.Event(ctx, page, ev)
			if s.Ended() {
				return
			}
		}
		if len(frames) > 0 {
			frames = nil
			if page.Queued() == 0 {
				if ids := p.Calls.Pending(); len(ids) > 0 {
					s.End(EndPending, ids)
				} else if first && !p.Input && !news {
					s.End(EndIdle, nil)
				}
			}
			first = false
			continue
		}
		frames = nil
		select {
		case <-page.Ready():
		case <-page.Done():
			if page.Queued() > 0 {
				continue
			}
			if errors.Is(page.Err(), engine.ErrSlowSubscriber) {
				s.End(EndSlow, nil)
			} else {
				s.End(EndClosed, nil)
			}
			return
		case <-keepalive.C:
			_ = p.SSE.Comment("keepalive")
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), ErrStopping) {
				s.End(EndStopping, nil)
			}
			return
		}
	}
}
