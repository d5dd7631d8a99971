package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// A relayed frame larger than a NATS message (the server's max_payload,
// 1 MiB by default; a tool's large result, a long chat's replay of one)
// crosses between the nodes in parts: messages in order on the pipe's
// subject, each with the header Gateway-Part: "<index>/<count>", whose
// payloads joined are the frame. One connection publishes a pipe's
// direction and one subscription reads it, in order; a part the reading
// client dropped shows as any dropped frame does (framesLost), and the
// page is closed to resume.

// partHeader numbers a relayed frame's parts.
const partHeader = "Gateway-Part"

// relaySlack is what a part leaves of max_payload for its headers.
const relaySlack = 512

// maxJoinHint bounds the room a frame's first part makes for the frame,
// which its header's count says.
const maxJoinHint = 64 << 20

// errNoParts: a frame too large for one NATS message, to a node of an
// earlier version, which cannot join parts.
var errNoParts = errors.New("a frame larger than a NATS message (max_payload) cannot go to a gateway node of an earlier version, which reads no parts: finish the rolling deploy, or raise max_payload")

// publishFrame publishes frame on subj, in parts when one message would
// pass the server's max_payload and the other side joins parts (else it
// fails with errNoParts), and adds the messages that went out to sent:
// each side of a pipe counts them (relaysync.go).
func publishFrame(nc *nats.Conn, subj string, frame []byte, parts bool, sent *uint64) error {
	limit := max(int(nc.MaxPayload())-relaySlack, relaySlack)
	if len(frame) <= limit {
		if err := nc.Publish(subj, frame); err != nil {
			return err
		}
		*sent++
		return nil
	}
	if !parts {
		return fmt.Errorf("%w (a frame of %d bytes)", errNoParts, len(frame))
	}
	count := (len(frame) + limit - 1) / limit
	for i := range count {
		m := nats.NewMsg(subj)
		m.Header.Set(partHeader, strconv.Itoa(i+1)+"/"+strconv.Itoa(count))
		m.Data = frame[i*limit : min((i+1)*limit, len(frame))]
		if err := nc.PublishMsg(m); err != nil {
			return fmt.Errorf("part %d of %d of a frame of %d bytes: %w", i+1, count, len(frame), err)
		}
		*sent++
	}
	return nil
}

// frameJoiner joins one subscription's parts into their frames. Only the
// subscription's reader uses it.
type frameJoiner struct {
	next, count int // the part expected next, of count; 0: none
	frame       []byte
}

// take reads a message: the frame it is or ends (done), or nothing while a
// frame's parts go on. A part out of order is an error: the pipe lost
// messages.
func (j *frameJoiner) take(m *nats.Msg) (frame []byte, done bool, err error) {
	h := m.Header.Get(partHeader)
	if h == "" {
		if j.next != 0 {
			return nil, false, fmt.Errorf("a frame after part %d of %d of another", j.next-1, j.count)
		}
		return m.Data, true, nil
	}
	index, count, err := readPartHeader(h)
	switch {
	case err != nil:
		return nil, false, err
	case index == 1 && j.next == 0:
		*j = frameJoiner{next: 1, count: count, frame: make([]byte, 0, joinHint(count, len(m.Data)))}
	case index != j.next || count != j.count:
		return nil, false, fmt.Errorf("part %d of %d where part %d of %d was due", index, count, j.next, j.count)
	}
	j.frame = append(j.frame, m.Data...)
	if j.next++; index < count {
		return nil, false, nil
	}
	frame = j.frame
	*j = frameJoiner{}
	return frame, true, nil
}

// joinHint is the room a set of count parts, the first of size bytes,
// makes for itself: their product, up to maxJoinHint (a count from the
// wire may be anything).
func joinHint(count, size int) int {
	if size == 0 || count > maxJoinHint/size {
		return maxJoinHint
	}
	return count * size
}

// readPartHeader reads "<index>/<count>".
func readPartHeader(h string) (index, count int, err error) {
	i, c, ok := strings.Cut(h, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(c)
	if !ok || err1 != nil || err2 != nil || index < 1 || index > count {
		return 0, 0, fmt.Errorf("a relayed part numbered %q", h)
	}
	return index, count, nil
}
