package jetstream

import (
	"bytes"
	"fmt"
	"strconv"
)

// A step larger than one NATS message (the server's max_payload, and the
// journal stream's largest message) is stored in parts: its batch's
// encoding cut in pieces, each in a message of its own on the session's
// subject, one after another, each fenced on the one before as every
// append is. The journal's readers join them: a set of parts is a batch
// once its last part is read. A set that stops short, because its writer
// died or gave the append up part way, holds no batch and is skipped: the
// engine appends that batch again, after it. So the journal still never
// holds half a step, and a step's size is bounded by nothing but memory:
// a worker's large result, or many parallel results, no longer leaves a
// session unable to store anything.
//
// A part's payload is a line that no batch's JSON starts with, then its
// piece:
//
//	~part 2/3 <set>\n<piece>
//
// The set names one append's parts, so that a node tells its own
// interrupted tries from another writer's (Store.landed).

// partPrefix starts every part's payload.
const partPrefix = "~part "

// partSlack is what a journal message's payload leaves of the largest
// message for the NATS headers of a publish (its fencing header) and a
// part's line.
const partSlack = 1024

// part is one message of a set.
type part struct {
	set          string
	index, count int // index from 1 to count
	piece        []byte
}

// isPart reports whether a journal message is a part.
func isPart(data []byte) bool { return bytes.HasPrefix(data, []byte(partPrefix)) }

// readPart reads a part's line; ok is false for a message that is not a
// part.
func readPart(data []byte) (p part, ok bool, err error) {
	if !isPart(data) {
		return part{}, false, nil
	}
	line, piece, found := bytes.Cut(data[len(partPrefix):], []byte{'\n'})
	if !found {
		return part{}, true, fmt.Errorf("a part whose line has no end (%.40q)", data)
	}
	numbers, set, _ := bytes.Cut(line, []byte{' '})
	index, count, _ := bytes.Cut(numbers, []byte{'/'})
	p = part{set: string(set), piece: piece}
	p.index, err = strconv.Atoi(string(index))
	if err == nil {
		p.count, err = strconv.Atoi(string(count))
	}
	if err != nil || p.index < 1 || p.index > p.count || len(set) == 0 || bytes.ContainsAny(set, " \n") {
		return part{}, true, fmt.Errorf("a part whose line is not \"index/count set\" (%q)", line)
	}
	return p, true, nil
}

// partCount is how many parts data needs when a part's payload may hold
// limit bytes, with set's name in its line.
func partCount(data []byte, limit int, set string) int {
	room := partRoom(limit, set)
	return (len(data) + room - 1) / room
}

// partRoom is a part's room for its piece.
func partRoom(limit int, set string) int {
	// The line with the most digits an index and a count can have.
	return max(limit-len(partPrefix)-2*20-len(" /\n")-len(set), 1)
}

// appendPart appends part index (from 1) of count of data to dst.
func appendPart(dst, data []byte, limit int, set string, index, count int) []byte {
	room := partRoom(limit, set)
	piece := data[(index-1)*room : min(index*room, len(data))]
	dst = append(dst, partPrefix...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(count), 10)
	dst = append(dst, ' ')
	dst = append(dst, set...)
	dst = append(dst, '\n')
	return append(dst, piece...)
}

// maxJoinHint bounds the room a set's first part makes for the set, which
// its line's count says.
const maxJoinHint = 64 << 20

// joiner joins a journal's parts into their batch, as the journal is read
// in order.
type joiner struct {
	set   string
	next  int // the index of the part that continues the set; 0: none
	count int
	whole []byte
}

// take reads the journal's next message: it returns the batch's encoding
// that the message ends (the message itself when it is not a part, the
// set joined at its last part), or nil while a set goes on. A message that
// follows a set that stopped short drops it.
func (j *joiner) take(data []byte) ([]byte, error) {
	p, ok, err := readPart(data)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		*j = joiner{}
		return data, nil
	case p.index == 1:
		// Room for the whole set, as its first part is as long as any.
		hint := maxJoinHint // the line's count may be anything
		if n := len(p.piece); n > 0 && p.count <= maxJoinHint/n {
			hint = p.count * n
		}
		*j = joiner{set: p.set, next: 1, count: p.count, whole: make([]byte, 0, hint)}
	case p.set != j.set || p.index != j.next || p.count != j.count:
		return nil, fmt.Errorf("part %d/%d of set %s does not continue the set before it", p.index, p.count, p.set)
	}
	j.whole = append(j.whole, p.piece...)
	if j.next++; p.index < p.count {
		return nil, nil
	}
	whole := j.whole
	*j = joiner{}
	return whole, nil
}
