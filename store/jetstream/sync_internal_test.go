package jetstream

import (
	"context"
	"testing"
	"time"
)

// TestSync: Options.Sync is how the embedded server flushes its files to
// the disk, at its start and still when JetStream goes back on after a
// full disk (revive, whose config the server fills from its options);
// with URL it is refused, the server there having its own.
func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sync     time.Duration
		interval time.Duration
		always   bool
	}{
		{"default", 0, DefaultSync, false},
		{"every 5s", 5 * time.Second, 5 * time.Second, false},
		{"every write", SyncEveryWrite, DefaultSync, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			looksEvery(t, time.Hour) // the looks are the test's own
			s, err := Open(context.Background(), Options{DataDir: t.TempDir(), Sync: tc.sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check := func(when string) {
				t.Helper()
				c := s.Server().JetStreamConfig()
				if c == nil || c.SyncInterval != tc.interval || c.SyncAlways != tc.always {
					t.Errorf("%s: the server's JetStream config %+v; want SyncInterval %v, SyncAlways %v", when, c, tc.interval, tc.always)
				}
			}
			check("at the start")
			stopJetStream(t, s)
			if on, err := reviveLooks(s, 2); !on || err != nil {
				t.Fatalf("revive: %v %v", on, err)
			}
			check("after JetStream went back on")
		})
	}
	if _, err := Open(context.Background(), Options{URL: "nats://127.0.0.1:1", Sync: SyncEveryWrite}); err == nil {
		t.Error("Open took Sync with URL")
	}
}
