package runners

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a set of goroutines, runners, that run functions. The zero
// Pool is ready to use, with the default idle time.
//
// The free runners are taken last in, first out, so the warmest goes
// first and the others age out: how many there are follows how much ran
// at once recently. The pool needs no goroutine of its own: a timer,
// armed while runners are free, ends those free for longer than the idle
// time.
type Pool struct {
	mu     sync.Mutex
	free   []*runner // free runners, the most recently freed last
	reaper *time.Timer
	closed bool
	wg     sync.WaitGroup // every runner goroutine
	idle   time.Duration  // 0: DefaultIdle
	made   int            // runners started, for tests
	busy   atomic.Int32   // functions given and not returned
}

// runner is one goroutine; work hands it its next function, or nil: end.
type runner struct {
	work  chan func()
	since time.Time // when it was freed
}

// DefaultIdle is how long a runner waits, free, before it ends. Under
// load a runner is taken again within microseconds; a second is enough to
// ride out a pause. Longer keeps more goroutines, and their stacks,
// through a lull; shorter starts more goroutines after one.
const DefaultIdle = time.Second

// Busy is how many functions given to Go have not returned yet: how
// much the pool's work is running or waiting to run.
func (p *Pool) Busy() int { return int(p.busy.Load()) }

// Go runs f on a free runner, or on a new one.
func (p *Pool) Go(f func()) {
	p.busy.Add(1)
	p.mu.Lock()
	if p.closed {
		// Whoever gives work after Close owns its goroutine: the pool has
		// no more runners to give.
		p.mu.Unlock()
		go func() {
			defer p.busy.Add(-1)
			f()
		}()
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

func (p *Pool) loop(r *runner, f func()) {
	defer p.wg.Done()
	for f != nil {
		f()
		p.busy.Add(-1)
		f = p.park(r)
	}
}

// park frees r and waits for its next function; nil: r ends.
func (p *Pool) park(r *runner) func() {
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
func (p *Pool) reap() {
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

func (p *Pool) idleFor() time.Duration {
	if p.idle == 0 {
		return DefaultIdle
	}
	return p.idle
}

// Close ends the free runners, and the others once they are done with
// what they run, then waits for them all when wait is set. Functions
// given to Go after Close run on goroutines of their own.
func (p *Pool) Close(wait bool) {
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
