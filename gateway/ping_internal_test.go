package gateway

import "testing"

// An unanswered ping closes a page whose pong waits behind the refused
// frames it sent, not one whose reader waits on the session after a few.
func TestPongBehindRefused(t *testing.T) {
	for _, tc := range []struct {
		name              string
		before, now       int64 // conn.slowed when the ping went, and when it failed
		handling, flooded bool
	}{
		{"no pause", 4, 4, true, false},
		{"pausing when it went and still", 5, 5, true, true},
		{"pausing now", 4, 7, true, true},
		{"paused meanwhile, reading the next frame", 4, 8, false, true},
		{"paused meanwhile, now waiting on the session", 4, 8, true, false},
	} {
		if got := pongBehindRefused(tc.before, tc.now, tc.handling); got != tc.flooded {
			t.Errorf("%s: pongBehindRefused(%d, %d, %v) = %v, want %v", tc.name, tc.before, tc.now, tc.handling, got, tc.flooded)
		}
	}
}
