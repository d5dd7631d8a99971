package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestMailboxRunsEachMessageOnceInOrder puts from many goroutines at once,
// past the inbox's bound, half of them with putHere, while the mailbox's
// goroutine keeps starting and leaving: every message runs, once, never
// two at a time (the race detector sees the plain counters), and each
// poster's messages in the order it put them.
func TestMailboxRunsEachMessageOnceInOrder(t *testing.T) {
	const posters, each = 8, 2000
	var (
		ran  int            // messages run; touched only by the goroutine
		last [posters]int   // each poster's last message seen
		bad  int            // messages out of order
		done sync.WaitGroup // every message ran
	)
	m := newMailbox(func(f func()) func() { f(); return nil }, func(run func()) { go run() })
	done.Add(posters * each)
	var wg sync.WaitGroup
	for p := range posters {
		put := m.put
		if p%2 == 1 {
			put = m.putHere // runs the message itself when the inbox is idle
		}
		wg.Go(func() {
			for i := 1; i <= each; i++ {
				err := put(context.Background(), context.Background(), func() {
					ran++
					if last[p] != i-1 {
						bad++
					}
					last[p] = i
					done.Done()
				})
				if err != nil {
					t.Errorf("put: %v", err)
					done.Done()
				}
			}
		})
	}
	wg.Wait()
	done.Wait()
	// The goroutine may still be between its last message and its return;
	// put once more and wait for it, which orders the reads below after
	// every message.
	seen := make(chan struct{})
	if err := m.put(context.Background(), context.Background(), func() { close(seen) }); err != nil {
		t.Fatal(err)
	}
	<-seen
	if ran != posters*each {
		t.Errorf("ran %d messages, want %d", ran, posters*each)
	}
	if bad > 0 {
		t.Errorf("%d messages ran out of order", bad)
	}
}

// TestMailboxFullWaits: with the inbox full and its goroutine stuck, put
// waits, and gives up with its context's error or ErrSessionClosed once
// the session ended; once the goroutine moves on, the put goes in.
func TestMailboxFullWaits(t *testing.T) {
	release := make(chan struct{})
	m := newMailbox(func(f func()) func() { f(); return nil }, func(run func()) { go run() })
	bg := context.Background()
	if err := m.put(bg, bg, func() { <-release }); err != nil {
		t.Fatal(err)
	}
	for range inboxSize {
		if err := m.put(bg, bg, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := m.put(ctx, bg, func() {}); !errors.Is(err, context.Canceled) {
		t.Errorf("put on a full inbox with a cancelled context: %v", err)
	}
	ended, end := context.WithCancel(bg)
	end()
	if err := m.put(bg, ended, func() {}); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("put on a full inbox of an ended session: %v", err)
	}
	ran := make(chan struct{})
	go func() {
		if err := m.put(bg, bg, func() { close(ran) }); err != nil {
			t.Errorf("put: %v", err)
		}
	}()
	close(release)
	<-ran
}

// TestPutHere: on an idle mailbox, putHere runs the message on the
// caller's goroutine before it returns, and what is put meanwhile runs
// after it, in order, on the mailbox's goroutine; on a busy mailbox it
// only queues the message.
func TestPutHere(t *testing.T) {
	bg := context.Background()
	started := 0
	m := newMailbox(func(f func()) func() { f(); return nil }, func(run func()) { started++; go run() })

	caller := goid()
	var ranOn, laterOn uint64
	var order []int
	done := make(chan struct{})
	err := m.putHere(bg, bg, func() {
		ranOn = goid()
		order = append(order, 1)
		// Put while the message runs: the caller hands these on.
		for i := 2; i <= 3; i++ {
			if err := m.put(bg, bg, func() {
				order = append(order, i)
				laterOn = goid()
				if i == 3 {
					close(done)
				}
			}); err != nil {
				t.Errorf("put: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if ranOn != caller {
		t.Errorf("the message ran on goroutine %d, not the caller's %d", ranOn, caller)
	}
	<-done
	if laterOn == caller {
		t.Error("the messages put meanwhile ran on the caller's goroutine")
	}
	if !slices.Equal(order, []int{1, 2, 3}) {
		t.Errorf("ran %v, want [1 2 3]", order)
	}
	if started != 1 {
		t.Errorf("started %d goroutines for the messages put meanwhile, want 1", started)
	}

	// Busy: a message holds the mailbox's goroutine.
	release, holding := make(chan struct{}), make(chan struct{})
	if err := m.put(bg, bg, func() { close(holding); <-release }); err != nil {
		t.Fatal(err)
	}
	<-holding
	queued := make(chan uint64, 1)
	go func() {
		if err := m.putHere(bg, bg, func() { queued <- goid() }); err != nil {
			t.Errorf("putHere: %v", err)
		}
		queued <- 0 // returned
	}()
	if got := <-queued; got != 0 {
		t.Fatalf("putHere on a busy mailbox ran the message before returning (goroutine %d)", got)
	}
	close(release)
	if got := <-queued; got == 0 || got == caller {
		t.Errorf("the queued message ran on goroutine %d", got)
	}
}

// goid is the calling goroutine's id, from its stack's first line.
func goid() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}
