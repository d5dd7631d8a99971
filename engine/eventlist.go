package engine

// eventList is a session's stored events, for replays, kept in blocks:
// appending never copies what the list holds, so a long session grows by
// a block at a time instead of doubling and copying all its events (and
// clearing the new array) every so often.
type eventList struct {
	blocks [][]Event // every block full (len == cap) but the last
	n      int
}

// A new block holds as many events as the list (or the batch being
// appended, if more), up to maxBlock: the list doubles as a slice does, so
// a short session's few events take no more room than in a slice, and a
// long one's blocks stop growing.
const maxBlock = 256

// eventListOf makes a list of events, which it keeps as they are.
func eventListOf(events []Event) eventList {
	if len(events) == 0 {
		return eventList{}
	}
	return eventList{blocks: [][]Event{events[:len(events):len(events)]}, n: len(events)}
}

func (l *eventList) len() int { return l.n }

func (l *eventList) append(events ...Event) {
	for len(events) > 0 {
		last := len(l.blocks) - 1
		if last < 0 || len(l.blocks[last]) == cap(l.blocks[last]) {
			l.blocks = append(l.blocks, make([]Event, 0, min(max(l.n, len(events)), maxBlock)))
			last++
		}
		b := l.blocks[last]
		k := min(cap(b)-len(b), len(events))
		l.blocks[last] = append(b, events[:k]...)
		l.n += k
		events = events[k:]
	}
}

// appendAfter appends the events after the first skip to dst.
func (l *eventList) appendAfter(dst []Event, skip int) []Event {
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
