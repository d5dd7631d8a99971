package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestMailboxRunsEachMessageOnceInOrder puts from many goroutines at once,
// past the inbox's bound, while the mailbox's goroutine keeps starting and
// leaving: every message runs, once, never two at a time (the race
// detector sees the plain counters), and each poster's messages in the
// order it put them.
func TestMailboxRunsEachMessageOnceInOrder(t *testing.T) {
	const posters, each = 8, 2000
	var (
		ran  int            // messages run; touched only by the goroutine
		last [posters]int   // each poster's last message seen
		bad  int            // messages out of order
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
				err := m.put(context.Background(), context.Background(), func() {
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
	var m *mailbox
	m = newMailbox(func() {
		for f := m.next(); f != nil; f = m.next() {
			f()
		}
	}, func(run func()) { go run() })
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
