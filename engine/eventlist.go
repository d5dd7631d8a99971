package engine

import "slices"

// eventList is a session's stored events, for replays, kept in blocks:
// appending never copies what the list holds, so a long session grows by
// a block at a time instead of doubling and copying all its events (and
// clearing the new array) every so often. A session keeps only its latest
// events (trim): a replay from before them reads the store.
type eventList struct {
	blocks  [][]Event // every block full (len == cap) but the last
	sizes   []int     // each block's bytes (eventBytes)
	n       int       // events ever appended, the dropped ones too
	dropped int       // events trimmed from the front: the first kept has seq dropped+1
	bytes   int       // the kept events' bytes
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

// eventListOf makes a list of a journal's events, keeping the latest of
// them as trim(keep) would: all of them, as they are, when keep < 0 or
// they are fewer; else a copy of the tail (the last event at least), so
// the journal's array goes.
func eventListOf(events []Event, keep int) eventList {
	from, size := len(events), 0
	for from > 0 && (keep < 0 || size < keep || from == len(events)) {
		from--
		size += eventBytes(events[from])
	}
	tail := events[from:]
	if len(tail) == 0 {
		return eventList{n: len(events), dropped: len(events)}
	}
	if from > 0 {
		tail = slices.Clone(tail)
	}
	return eventList{blocks: [][]Event{tail[:len(tail):len(tail)]}, sizes: []int{size}, n: len(events), dropped: from, bytes: size}
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
			l.sizes = append(l.sizes, 0)
			last++
		}
		b := l.blocks[last]
		k := min(cap(b)-len(b), len(events))
		for _, ev := range events[:k] {
			l.sizes[last] += eventBytes(ev)
			l.bytes += eventBytes(ev)
		}
		l.blocks[last] = append(b, events[:k]...)
		l.n += k
		events = events[k:]
	}
}

// trim drops whole blocks from the front while what is left still holds
// at least keep bytes; keep < 0 keeps everything. The last block always
// stays.
func (l *eventList) trim(keep int) {
	if keep < 0 {
		return
	}
	k := 0
	for k < len(l.blocks)-1 && l.bytes-l.sizes[k] >= keep {
		l.bytes -= l.sizes[k]
		l.dropped += len(l.blocks[k])
		k++
	}
	if k == 0 {
		return
	}
	l.blocks = slices.Delete(l.blocks, 0, k) // clears the slots it frees
	l.sizes = slices.Delete(l.sizes, 0, k)
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
