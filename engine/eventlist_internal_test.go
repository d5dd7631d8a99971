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

// TestEventListKeepsTheLatest: trimmed, the list keeps whole blocks of its
// latest events, at least keep bytes of them, and reads back from any seq
// it keeps; loaded from a journal in one block, it is cut to as much.
func TestEventListKeepsTheLatest(t *testing.T) {
	frame := []byte(`{"type":"model.delta","seq":1,"text":"a piece of a reply"}`)
	per := eventBytes(Event{Frame: frame})
	for _, keep := range []int{0, 1, per, 10 * per, 300 * per, 5000 * per} {
		var l eventList
		var all []Event
		for i := range 2000 {
			ev := Event{Seq: int64(i + 1), Frame: frame}
			all = append(all, ev)
			l.append(ev)
			l.trim(keep)
			kept := l.len() - l.first() + 1
			if l.bytes != kept*per {
				t.Fatalf("keep %d, after %d: %d bytes counted for %d events of %d", keep, i+1, l.bytes, kept, per)
			}
			if l.bytes < min(keep, l.len()*per) {
				t.Fatalf("keep %d, after %d: %d bytes kept", keep, i+1, l.bytes)
			}
			// Dropping the first event would still leave keep: it is gone.
			if kept > 1 && l.bytes-per >= keep {
				t.Fatalf("keep %d, after %d: %d bytes kept, more than it needs", keep, i+1, l.bytes)
			}
		}
		if l.len() != len(all) {
			t.Fatalf("keep %d: len %d, want %d", keep, l.len(), len(all))
		}
		for _, skip := range []int{l.first() - 1, l.first(), len(all) - 1, len(all)} {
			got := l.appendAfter(nil, skip)
			if len(got) != len(all)-skip || (len(got) > 0 && got[0].Seq != int64(skip+1)) {
				t.Fatalf("keep %d, after %d: %d events from %v", keep, skip, len(got), got[:min(1, len(got))])
			}
		}
		loaded := eventListOf(all)
		loaded.trim(keep)
		if loaded.len() != len(all) || loaded.bytes < min(keep, len(all)*per) || (loaded.bytes-per >= keep && loaded.bytes > per) || loaded.first() > 1 && &loaded.blocks[0][0] == &all[loaded.first()-1] {
			t.Fatalf("keep %d: loaded, %d events, %d bytes kept from seq %d (in the journal's array: %t)", keep, loaded.len(), loaded.bytes, loaded.first(), &loaded.blocks[0][0] == &all[loaded.first()-1])
		}
		if got := loaded.appendAfter(nil, loaded.first()-1); len(got) != len(all)-loaded.first()+1 || got[len(got)-1].Seq != int64(len(all)) {
			t.Fatalf("keep %d: loaded, read back %d events", keep, len(got))
		}
	}
}

// TestEventListLoadedThenAppended: a journal's events, loaded in one block,
// are cut to what trim keeps as events are appended after them, and read
// back whole from any seq kept.
func TestEventListLoadedThenAppended(t *testing.T) {
	frame := []byte(`{"type":"model.delta","seq":1,"text":"a piece of a reply"}`)
	per := eventBytes(Event{Frame: frame})
	for _, keep := range []int{1, 10 * per, 300 * per, 1200 * per, 5000 * per} {
		var all []Event
		for i := range 1000 {
			all = append(all, Event{Seq: int64(i + 1), Frame: frame})
		}
		l := eventListOf(all)
		for i := 1000; i < 2000; i++ {
			ev := Event{Seq: int64(i + 1), Frame: frame}
			all = append(all, ev)
			l.append(ev)
			l.trim(keep)
			kept := l.len() - l.first() + 1
			if l.bytes != kept*per || l.bytes < min(keep, l.len()*per) {
				t.Fatalf("keep %d, after %d: %d bytes counted, %d events kept", keep, i+1, l.bytes, kept)
			}
			if kept > max(keep/per+1, 1) {
				t.Fatalf("keep %d, after %d: %d events kept", keep, i+1, kept)
			}
			got := l.appendAfter(nil, l.first()-1)
			if len(got) != kept || got[0].Seq != int64(l.first()) || got[len(got)-1].Seq != int64(i+1) {
				t.Fatalf("keep %d, after %d: read back %d events from seq %d", keep, i+1, len(got), got[0].Seq)
			}
		}
	}
}
