package jetstream

import (
	"errors"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// TestAppendBehindFencesOnlyWhatStaysBehind: an append that finds the
// journal ending before what this node stored is tried again (a replica a
// moment behind its leader answers one read so), and fenced only at the
// behindTries-th in a row (a journal purged or restored under the
// session); one stored in between starts the count again.
func TestAppendBehindFencesOnlyWhatStaysBehind(t *testing.T) {
	s := &Store{heads: map[string]head{"s1": {seq: 9}}, splits: map[string]splitTry{}, behind: map[string]int{}}
	for try := 1; try <= behindTries; try++ {
		err := s.appendBehind("s1", 0, 10)
		if fenced := errors.Is(err, ErrFenced); fenced != (try == behindTries) || !errors.Is(err, engine.ErrSeqGap) {
			t.Errorf("try %d: %v, fenced %v; want fenced at try %d alone, ErrSeqGap always", try, err, fenced, behindTries)
		}
		if _, ok := s.heads["s1"]; ok {
			t.Errorf("try %d: the journal's end is still taken as known: the next try must read it again", try)
		}
	}
	_ = s.appendBehind("s1", 0, 10)
	s.stored("s1", head{seq: 10})
	for try := 1; try < behindTries; try++ {
		if err := s.appendBehind("s1", 0, 11); errors.Is(err, ErrFenced) {
			t.Errorf("try %d after an append was stored: fenced (%v): the count did not start again", try, err)
		}
	}
}
