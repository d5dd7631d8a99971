package engine

import (
	"sync"
	"testing"
)

// TestMailboxRunsEachMessageOnceInOrder posts from many goroutines at once
// while the mailbox's goroutine keeps starting and leaving: every message
// runs, once, never two at a time (the race detector sees the plain
// counters), and each poster's messages in the order it posted them.
func TestMailboxRunsEachMessageOnceInOrder(t *testing.T) {
	const posters, each = 8, 2000
	var (
		ran  int            // messages run; touched only by the goroutine
		last [posters]int   // each poster's last message seen
		bad  []string       // what went wrong, reported after
		done sync.WaitGroup // every message ran
	)
	var m *mailbox
	m = newMailbox(func() {
		for f := m.next(); f != nil; f = m.next() {
			f()
		}
	}, func(run func()) { go run() })
	done.Add(posters * each)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := 1; i <= each; i++ {
				m.inbox <- func() {
					ran++
					if last[p] != i-1 {
						bad = append(bad, "out of order")
					}
					last[p] = i
					done.Done()
				}
				m.wake()
			}
		})
	}
	wg.Wait()
	done.Wait()
	// The goroutine may still be between its last message and its return;
	// post once more and wait for it, which orders the reads below after
	// every message.
	seen := make(chan struct{})
	m.inbox <- func() { close(seen) }
	m.wake()
	<-seen
	if ran != posters*each {
		t.Errorf("ran %d messages, want %d", ran, posters*each)
	}
	if len(bad) > 0 {
		t.Errorf("%d messages ran out of order", len(bad))
	}
}
