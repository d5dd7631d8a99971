package clock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Both clocks satisfy Clock.
var (
	_ clock.Clock = clock.Real{}
	_ clock.Clock = (*clock.Fake)(nil)
)

func TestFakeNowMovesOnlyOnAdvance(t *testing.T) {
	c := clock.NewFake(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now %v, want %v", c.Now(), start)
	}
	c.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Errorf("Now %v, want %v", c.Now(), want)
	}
	c.Advance(0)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Errorf("Advance(0) moved the clock to %v", c.Now())
	}
}

// TestFakeFiresInOrder: due timers fire earliest first, ties in the order
// they were scheduled, each seeing Now() at its own due time.
func TestFakeFiresInOrder(t *testing.T) {
	c := clock.NewFake(start)
	var fired []string
	add := func(name string, d time.Duration) {
		c.AfterFunc(d, func() { fired = append(fired, name+"@"+c.Now().Sub(start).String()) })
	}
	add("c", 3*time.Second)
	add("a", time.Second)
	add("b1", 2*time.Second)
	add("b2", 2*time.Second)
	add("late", time.Hour)
	c.Advance(3 * time.Second)
	if want := []string{"a@1s", "b1@2s", "b2@2s", "c@3s"}; !slices.Equal(fired, want) {
		t.Errorf("fired %v, want %v", fired, want)
	}
	if n := c.Pending(); n != 1 {
		t.Errorf("Pending %d, want 1", n)
	}
	c.Advance(time.Hour)
	if fired[len(fired)-1] != "late@1h0m0s" {
		t.Errorf("fired %v", fired)
	}
}

func TestFakeBoundary(t *testing.T) {
	tests := []struct {
		name    string
		after   time.Duration
		advance time.Duration
		fires   bool
	}{
		{"just before", time.Second, time.Second - time.Nanosecond, false},
		{"exactly at", time.Second, time.Second, true},
		{"past", time.Second, time.Minute, true},
		{"zero delay fires on the next Advance", 0, 0, true},
		{"negative delay is due now", -time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(start)
			fired := false
			c.AfterFunc(tt.after, func() { fired = true })
			if fired {
				t.Fatal("fired before any Advance")
			}
			c.Advance(tt.advance)
			if fired != tt.fires {
				t.Errorf("fired %v, want %v", fired, tt.fires)
			}
		})
	}
}

func TestFakeStop(t *testing.T) {
	c := clock.NewFake(start)
	fired := 0
	tm := c.AfterFunc(time.Second, func() { fired++ })
	if !tm.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Error("a second Stop reported true")
	}
	c.Advance(time.Minute)
	if fired != 0 || c.Pending() != 0 {
		t.Errorf("a stopped timer fired %d times; %d pending", fired, c.Pending())
	}
	tm = c.AfterFunc(time.Second, func() { fired++ })
	c.Advance(time.Second)
	if tm.Stop() {
		t.Error("Stop after firing reported true")
	}
	if fired != 1 {
		t.Errorf("fired %d times", fired)
	}
}

// TestFakeCallbacks: a callback may schedule and stop timers; one that falls
// due within the same Advance fires in it, at its own time.
func TestFakeCallbacks(t *testing.T) {
	c := clock.NewFake(start)
	var fired []time.Duration
	var second clock.Timer
	c.AfterFunc(time.Second, func() {
		fired = append(fired, c.Now().Sub(start))
		c.AfterFunc(time.Second, func() { fired = append(fired, c.Now().Sub(start)) })
		second.Stop()
	})
	second = c.AfterFunc(1500*time.Millisecond, func() { t.Error("a timer stopped by a callback fired") })
	c.Advance(5 * time.Second)
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(fired, want) {
		t.Errorf("fired at %v, want %v", fired, want)
	}
	if !c.Now().Equal(start.Add(5 * time.Second)) {
		t.Errorf("Now %v after Advance(5s)", c.Now())
	}
}

// TestFakeConcurrent: AfterFunc, Stop, Now and Pending may be called from
// many goroutines while another advances the clock (run with -race).
func TestFakeConcurrent(t *testing.T) {
	c := clock.NewFake(start)
	var mu sync.Mutex
	fired := 0
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				tm := c.AfterFunc(time.Duration(j%10)*time.Millisecond, func() {
					mu.Lock()
					fired++
					mu.Unlock()
				})
				if (i+j)%3 == 0 {
					tm.Stop()
				}
				_ = c.Now()
				_ = c.Pending()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				c.Advance(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	close(done)
	c.Advance(time.Hour)
	if n := c.Pending(); n != 0 {
		t.Errorf("%d timers pending after the last Advance", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if fired == 0 || fired > 800 {
		t.Errorf("fired %d callbacks", fired)
	}
}

func TestReal(t *testing.T) {
	before := time.Now()
	if now := (clock.Real{}).Now(); now.Before(before) {
		t.Errorf("Real.Now %v is before %v", now, before)
	}
	done := make(chan struct{})
	(clock.Real{}).AfterFunc(0, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Real.AfterFunc(0) never fired")
	}
	tm := (clock.Real{}).AfterFunc(time.Hour, func() { t.Error("a stopped real timer fired") })
	if !tm.Stop() {
		t.Error("Stop of a pending real timer reported false")
	}
}

// Sleep returns once its time passed on the clock, at once for none, and
// with the context's error when it ends first.
func TestSleep(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	if err := clock.Sleep(context.Background(), c, 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), c, time.Second) }()
	waitArmed(t, c, 1)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its time", err)
	default:
	}
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v once its time passed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- clock.Sleep(ctx, c, time.Hour) }()
	waitArmed(t, c, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep cut by its context = %v, want context.Canceled", err)
	}
	if n := c.Pending(); n != 0 {
		t.Errorf("%d timers left after a Sleep cut short", n)
	}
}

// waitArmed waits for n timers on c, or fails the test after 10 s.
func waitArmed(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitPending(ctx, n); err != nil {
		t.Fatalf("%d timers armed, want %d: %v", c.Pending(), n, err)
	}
}

// WaitPending returns once as many timers are armed, at once when they
// are already, and with the context's error when it ends first; a timer
// stopped or fired is not pending.
func TestWaitPending(t *testing.T) {
	c := clock.NewFake(start)
	first := c.AfterFunc(time.Second, func() {})
	if err := c.WaitPending(context.Background(), 1); err != nil {
		t.Fatalf("WaitPending(1) with one armed = %v", err)
	}
	waited := make(chan error, 1)
	long, cancelLong := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLong()
	go func() { waited <- c.WaitPending(long, 3) }()
	c.AfterFunc(time.Second, func() {})
	select {
	case err := <-waited:
		t.Fatalf("WaitPending(3) returned %v with two timers armed", err)
	case <-time.After(20 * time.Millisecond):
	}
	c.AfterFunc(time.Hour, func() {})
	if err := <-waited; err != nil {
		t.Fatalf("WaitPending(3) = %v once three were armed", err)
	}

	first.Stop()
	c.Advance(time.Second) // the second fires; the third stays
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.WaitPending(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitPending(2) with one left = %v, want context.DeadlineExceeded", err)
	}
}
