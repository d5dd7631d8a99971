package engine

import (
	"bytes"
	"slices"
)

// eventList is a session's stored events, for replays, kept in blocks:
// appending never copies what the list holds, so a long session grows by
// a block at a time instead of doubling and copying all its events (and
// clearing the new array) every so often. A session keeps only its latest
// events (trim): a replay from before them reads the store.
type eventList struct {
	blocks  [][]Event // every block full (len == cap) but the last
	n       int       // events ever appended, the dropped ones too
	dropped int       // events trimmed from the front: the first kept has seq dropped+1
	bytes   int       // the kept events' bytes
	// loaded: the first block is a journal's, as the store gave it
	// (eventListOf), until trim first cuts it.
	loaded bool
}

// A new block holds as many events as the list (or the batch being
// appended, if more), up to maxBlock: the list doubles as a slice does, so
// a short session's few events take no more room than in a slice, and a
// long one's blocks stop growing.
const maxBlock = 256

// eventOverhead is what an Event costs beyond its frame's bytes: the
// struct in its block and the frame's allocation rounded up, about.
const eventOverhead = 64

func eventBytes(ev Event) int { return len(ev.Frame) + eventOverhead }

// eventListOf makes a list of a journal's events, which it keeps as they
// are, in one block, until trim cuts it.
func eventListOf(events []Event) eventList {
	if len(events) == 0 {
		return eventList{}
	}
	size := 0
	for _, ev := range events {
		size += eventBytes(ev)
	}
	return eventList{blocks: [][]Event{events[:len(events):len(events)]}, n: len(events), bytes: size, loaded: true}
}

// len is how many events were ever appended, the trimmed ones too: the
// seq of the last.
func (l *eventList) len() int { return l.n }

// first is the seq of the first event the list keeps (len()+1 when it
// keeps none).
func (l *eventList) first() int { return l.dropped + 1 }

func (l *eventList) append(events ...Event) {
	for len(events) > 0 {
		last := len(l.blocks) - 1
		if last < 0 || len(l.blocks[last]) == cap(l.blocks[last]) {
			l.blocks = append(l.blocks, make([]Event, 0, min(max(l.n-l.dropped, len(events)), maxBlock)))
			last++
		}
		b := l.blocks[last]
		k := min(cap(b)-len(b), len(events))
		for _, ev := range events[:k] {
			l.bytes += eventBytes(ev)
		}
		l.blocks[last] = append(b, events[:k]...)
		l.n += k
		events = events[k:]
	}
}

// trim drops the oldest events while what is left still holds at least
// keep bytes, and always keeps the last; keep < 0 keeps everything. It
// drops none from seq pinned on (0: none pinned). A block emptied goes;
// one cut keeps its array, the dropped events cleared (their frames go),
// unless it is a journal's, loaded in one block (eventListOf): what it
// keeps is copied, frames too, so that the journal's array goes, and
// the store's messages the frames lay in.
func (l *eventList) trim(keep int, pinned int) {
	if keep < 0 {
		return
	}
	for len(l.blocks) > 0 {
		b := l.blocks[0]
		cut := 0
		for cut < len(b) && l.n-l.dropped-cut > 1 && (pinned == 0 || l.dropped+cut+1 < pinned) && l.bytes-eventBytes(b[cut]) >= keep {
			l.bytes -= eventBytes(b[cut])
			cut++
		}
		if cut == 0 {
			return
		}
		l.dropped += cut
		if cut == len(b) {
			l.blocks = slices.Delete(l.blocks, 0, 1) // clears the slot it frees
			l.loaded = false
			continue
		}
		if l.loaded {
			kept := make([]Event, len(b)-cut)
			for i, ev := range b[cut:] {
				kept[i] = Event{Seq: ev.Seq, Type: ev.Type, Frame: bytes.Clone(ev.Frame)}
			}
			l.blocks[0], l.loaded = kept, false
		} else {
			clear(b[:cut])
			l.blocks[0] = b[cut:]
		}
		return
	}
}

// appendAfter appends the events after the first skip to dst; skip must
// be at least the trimmed events' count (first()-1).
func (l *eventList) appendAfter(dst []Event, skip int) []Event {
	skip -= l.dropped
	for _, b := range l.blocks {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		dst = append(dst, b[skip:]...)
		skip = 0
	}
	return dst
}
