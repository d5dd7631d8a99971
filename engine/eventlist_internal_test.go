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
			l.trim(keep, 0)
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
		loaded.trim(keep, 0)
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
			l.trim(keep, 0)
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

// deltaFrame is a model.delta frame, and perDelta what an event of it
// counts for (eventBytes).
var (
	deltaFrame = []byte(`{"type":"model.delta","seq":1,"text":"a piece of a reply"}`)
	perDelta   = eventBytes(Event{Frame: deltaFrame})
)

// loadedDeltas is a list loaded from a journal of n deltas (eventListOf).
func loadedDeltas(n int) eventList {
	all := make([]Event, n)
	for i := range all {
		all[i] = Event{Seq: int64(i + 1), Frame: deltaFrame}
	}
	return eventListOf(all)
}

// TestEventListPinned: trim drops no event from the pinned seq on, whatever
// keep says, and drops what it may once the pin goes.
func TestEventListPinned(t *testing.T) {
	frame, per := deltaFrame, perDelta
	l := loadedDeltas(1000)
	l.trim(100*per, 300)
	if l.first() != 300 {
		t.Fatalf("pinned at 300: the list keeps from %d", l.first())
	}
	for i := 1000; i < 1500; i++ {
		l.append(Event{Seq: int64(i + 1), Frame: frame})
		l.trim(100*per, 300)
		if l.first() != 300 {
			t.Fatalf("pinned at 300, after %d: the list keeps from %d", i+1, l.first())
		}
	}
	l.trim(100*per, 0)
	if got := l.len() - l.first() + 1; got != 100 {
		t.Fatalf("unpinned: %d events kept, want 100", got)
	}
	if got := l.appendAfter(nil, l.first()-1); len(got) != 100 || got[99].Seq != 1500 {
		t.Fatalf("read back %d events", len(got))
	}
}

// TestEventListCopiesAJournalOnce: a loaded journal's block is copied (its
// frames too) when trim first cuts it, and cut in place after that, however
// many events are kept.
func TestEventListCopiesAJournalOnce(t *testing.T) {
	frame, per := deltaFrame, perDelta
	l := loadedDeltas(1000)
	copies := 0
	for i := 1000; i < 1600; i++ {
		l.append(Event{Seq: int64(i + 1), Frame: frame})
		old, first := l.blocks[0], l.first()
		l.trim(400*per, 0)
		cut := l.first() - first
		if cut == 0 || cut >= len(old) {
			continue
		}
		if &l.blocks[0][0] != &old[cut] {
			copies++
			if &l.blocks[0][0].Frame[0] == &old[cut].Frame[0] {
				t.Errorf("after %d: the journal's events copied, their frames not", i+1)
			}
		}
	}
	if copies != 1 {
		t.Errorf("the journal's block was copied %d times, want once", copies)
	}
}
