package engine

import (
	"testing"
)

// TestEventListKeepsOrder: whatever the appends' sizes, the list reads
// back every event in order, from any point.
func TestEventListKeepsOrder(t *testing.T) {
	for _, start := range []int{0, 1, 7, 300} {
		var want []Event
		for i := range start {
			want = append(want, Event{Seq: int64(i + 1)})
		}
		l := eventListOf(want)
		for _, n := range []int{1, 3, 8, 0, 250, 1, 600, 5} {
			batch := make([]Event, n)
			for i := range batch {
				batch[i] = Event{Seq: int64(len(want) + i + 1)}
			}
			l.append(batch...)
			want = append(want, batch...)
		}
		if l.len() != len(want) {
			t.Fatalf("start %d: len %d, want %d", start, l.len(), len(want))
		}
		for _, skip := range []int{0, 1, 8, 255, 256, 257, len(want) - 1, len(want)} {
			got := l.appendAfter(nil, skip)
			if len(got) != len(want)-skip {
				t.Fatalf("start %d, skip %d: %d events, want %d", start, skip, len(got), len(want)-skip)
			}
			for i, ev := range got {
				if ev.Seq != int64(skip+i+1) {
					t.Fatalf("start %d, skip %d: event %d has seq %d, want %d", start, skip, i, ev.Seq, skip+i+1)
				}
			}
		}
		for i, b := range l.blocks[:len(l.blocks)-1] {
			if len(b) != cap(b) {
				t.Fatalf("start %d: block %d of %d holds %d of %d", start, i, len(l.blocks), len(b), cap(b))
			}
		}
	}
}
