package engine

import (
	"sync"
	"time"
)

// runners are the goroutines that run sessions' work: their messages
// (mailbox.go), model turns and worker attempts. A session asks for one
// when its inbox gets a message, or a turn or an attempt starts, and gives
// it back when that is done; the runner then waits, free, for the next
// work, for up to runnerIdle, and ends.
//
// Why not a new goroutine each time: a new goroutine's stack starts small
// and is copied, twice as large, each time a step outgrows it (schema
// validation, JSON), which took 6% of the gateway's CPU under load. A free
// runner keeps the stack it grew. The free ones are taken last in, first
// out, so the warmest goes first and the others age out. How many there
// are follows how many sessions had messages at once recently, not how
// many sessions exist: an idle session still holds no goroutine.
//
// The pool needs no goroutine of its own: a timer, armed while runners
// are free, ends those free for longer than runnerIdle.
type runners struct {
	mu     sync.Mutex
	free   []*runner // free runners, the most recently freed last
	reaper *time.Timer
	closed bool
	wg     sync.WaitGroup // every runner goroutine
	idle   time.Duration  // 0: runnerIdle
	made   int            // runners started, for tests
}

// runner is one goroutine; work hands it its next function, or nil: end.
type runner struct {
	work  chan func()
	since time.Time // when it was freed
}

// runnerIdle is how long a runner waits, free, before it ends.
const runnerIdle = 10 * time.Second

// run runs f on a free runner, or on a new one.
func (p *runners) run(f func()) {
	p.mu.Lock()
	if p.closed {
		// Engine.Close gave up waiting for this session: its own count in
		// Engine.wg is the owner of this goroutine.
		p.mu.Unlock()
		go f()
		return
	}
	if n := len(p.free); n > 0 {
		r := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		r.work <- f // buffered: the runner takes it when it gets there
		return
	}
	p.wg.Add(1)
	p.made++
	p.mu.Unlock()
	go p.loop(&runner{work: make(chan func(), 1)}, f)
}

func (p *runners) loop(r *runner, f func()) {
	defer p.wg.Done()
	for f != nil {
		f()
		f = p.park(r)
	}
}

// park frees r and waits for its next function; nil: r ends.
func (p *runners) park(r *runner) func() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	r.since = time.Now()
	p.free = append(p.free, r)
	if p.reaper == nil {
		p.reaper = time.AfterFunc(p.idleFor(), p.reap)
	}
	p.mu.Unlock()
	return <-r.work
}

// reap ends the runners free for longer than runnerIdle, and comes back
// while any are left.
func (p *runners) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reaper = nil
	if p.closed {
		return
	}
	now, idle := time.Now(), p.idleFor()
	n := 0 // the oldest come first
	for n < len(p.free) && now.Sub(p.free[n].since) >= idle {
		close(p.free[n].work)
		n++
	}
	p.free = append(p.free[:0], p.free[n:]...)
	clear(p.free[len(p.free):cap(p.free)])
	if len(p.free) > 0 {
		p.reaper = time.AfterFunc(idle-now.Sub(p.free[0].since), p.reap)
	}
}

func (p *runners) idleFor() time.Duration {
	if p.idle == 0 {
		return runnerIdle
	}
	return p.idle
}

// close ends the free runners, and the others once they are done with
// what they run, then waits for them all when wait is set. Messages after
// close run on goroutines of their own.
func (p *runners) close(wait bool) {
	p.mu.Lock()
	p.closed = true
	for _, r := range p.free {
		close(r.work)
	}
	p.free = nil
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	p.mu.Unlock()
	if wait {
		p.wg.Wait()
	}
}
