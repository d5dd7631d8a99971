package runners

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunnersReuse: functions run, each once, and a free runner takes the
// next one instead of a new goroutine.
func TestRunnersReuse(t *testing.T) {
	p := &Pool{idle: time.Hour}
	defer p.Close(true)
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	wg.Add(n)
	for range n {
		p.Go(func() {
			mu.Lock()
			ran++
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if ran != n {
		t.Fatalf("ran %d functions, want %d", ran, n)
	}
	made := waitRunners(t, p, func(free, made int) bool { return free == made }, "every runner free again")
	for i := range 50 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		waitRunners(t, p, func(free, _ int) bool { return free == made }, "the runner back")
		if _, now := p.counts(); now != made {
			t.Fatalf("run %d started a runner while %d were free", i+1, made)
		}
	}
}

// TestRunnersEndWhenIdle: a runner free for longer than its idle time
// ends; close ends those still free.
func TestRunnersEndWhenIdle(t *testing.T) {
	p := &Pool{idle: 10 * time.Millisecond}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitRunners(t, p, func(free, made int) bool { return made == 1 && free == 0 }, "the free runner ended")
	p.wg.Wait() // returns: the runner's goroutine ended

	q := &Pool{idle: time.Hour}
	done = make(chan struct{})
	q.Go(func() { close(done) })
	<-done
	waitRunners(t, q, func(free, _ int) bool { return free == 1 }, "the runner free")
	q.Close(true) // returns once the free runner ended
	q.Go(func() {})
}

func (p *Pool) counts() (free, made int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free), p.made
}

// waitRunners waits until ok(free, made) and returns made.
func waitRunners(t *testing.T, p *Pool, ok func(free, made int) bool, what string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		free, made := p.counts()
		if ok(free, made) {
			return made
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %d runners free of %d made", what, free, made)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBusy counts the functions given and not returned, on a free
// runner, a new one, and after Close on a goroutine of their own.
func TestBusy(t *testing.T) {
	p := &Pool{idle: time.Hour}
	release := make(chan struct{})
	var started sync.WaitGroup
	hold := func() { started.Done(); <-release }
	started.Add(2)
	p.Go(hold)
	p.Go(hold)
	started.Wait()
	if got := p.Busy(); got != 2 {
		t.Errorf("two functions running: Busy %d", got)
	}
	close(release)
	waitRunners(t, p, func(free, made int) bool { return free == made }, "both runners free")
	if got := p.Busy(); got != 0 {
		t.Errorf("all returned: Busy %d", got)
	}
	p.Close(true)
	release = make(chan struct{})
	started.Add(1)
	p.Go(hold)
	started.Wait()
	if got := p.Busy(); got != 1 {
		t.Errorf("after Close, one running: Busy %d", got)
	}
	close(release)
	for deadline := time.Now().Add(10 * time.Second); p.Busy() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Busy %d after the function returned", p.Busy())
		}
	}
}
