package engine

import (
	"context"
	"fmt"
	"testing"
)

// TestMemJournalFitsItsMap: what a MemoryStore keeps of a new session is
// its first events' block and the list of blocks, in objects of their own,
// and nothing else: the journal itself is in the map's table. A journal
// too large for the table would be one more object per session, which a
// parked session keeps among the freed objects of its time in memory.
func TestMemJournalFitsItsMap(t *testing.T) {
	m := NewMemoryStore()
	ids := make([]string, 1002)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	b := Batch{Events: []Event{{Seq: 1, Type: EventSessionIdle, Frame: []byte(`{"type":"session.idle","seq":1}`)}},
		State: []byte(`{"v":1}`), Agent: true}
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if err := m.Append(context.Background(), ids[n], b); err != nil {
			t.Fatal(err)
		}
		n++
	})
	if allocs > 2 {
		t.Errorf("a new session's first append allocates %v objects, want 2 (its events' block and the list of blocks)", allocs)
	}
}
