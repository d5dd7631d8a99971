package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The acks a server sends read as the client reads them: the sequence, or
// the refusal with its code (what Append tells fencing by).
func TestReadAck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ack     string
		seq     uint64
		errCode jetstream.ErrorCode // with an *APIError
		err     error
	}{
		{name: "usual", ack: `{"stream":"GATEWAY_JOURNAL","seq":42}`, seq: 42},
		{name: "first", ack: `{"stream":"GATEWAY_JOURNAL","seq":1}`, seq: 1},
		{name: "duplicate", ack: `{"stream":"GATEWAY_JOURNAL","seq":42,"duplicate":true}`, seq: 42},
		{name: "domain", ack: `{"stream":"GATEWAY_JOURNAL","seq":7,"domain":"hub"}`, seq: 7},
		{name: "spaced", ack: `{"stream": "GATEWAY_JOURNAL", "seq": 9}`, seq: 9},
		{name: "wrong last sequence", ack: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"GATEWAY_JOURNAL","seq":0}`,
			errCode: jetstream.JSErrCodeStreamWrongLastSequence},
		{name: "no stream", ack: `{"seq":3}`, err: jetstream.ErrInvalidJSAck},
		{name: "not JSON", ack: `+OK`, err: jetstream.ErrInvalidJSAck},
		{name: "empty", ack: ``, err: jetstream.ErrInvalidJSAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := readAck([]byte(tc.ack))
			var apiErr *jetstream.APIError
			switch {
			case tc.errCode != 0:
				if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.errCode {
					t.Errorf("readAck = %d, %v; want an APIError %d", seq, err, tc.errCode)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("readAck = %d, %v; want %v", seq, err, tc.err)
				}
			case err != nil || seq != tc.seq:
				t.Errorf("readAck = %d, %v; want %d", seq, err, tc.seq)
			}
		})
	}
}

// quickAck never reads an ack otherwise than encoding/json does.
func FuzzQuickAck(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":1}`, `{"stream":"S","seq":18446744073709551615}`, `{"stream":"S","seq":18446744073709551616}`,
		`{"stream":"S\"","seq":1}`, `{"stream":"S","seq":01}`, `{"stream":"","seq":1}`, `{"stream":"S","seq":1}x`, `{"stream":"\u0053","seq":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, ok := quickAck(data)
		if !ok {
			return
		}
		var ack jetstream.PubAck
		if err := json.Unmarshal(data, &ack); err != nil || ack.Stream == "" || ack.Sequence != seq {
			t.Fatalf("quickAck(%q) = %d; encoding/json: %+v, %v", data, seq, ack, err)
		}
	})
}

// A publish no stream takes is asked again as the client asks, then
// reported as the client reports it, whatever the caller's context: one
// that never ends (the engine's), one with a deadline, one that may be
// cancelled. A cancelled one returns its own error at once.
func TestRequestNoStream(t *testing.T) {
	s, err := Open(context.Background(), Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	open, stop := context.WithCancel(context.Background())
	defer stop()
	bounded, stopBounded := context.WithTimeout(context.Background(), time.Minute)
	defer stopBounded()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"never ends", context.Background(), jetstream.ErrNoStreamResponse},
		{"deadline", bounded, jetstream.ErrNoStreamResponse},
		{"cancellable", open, jetstream.ErrNoStreamResponse},
		{"cancelled", cancelled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := s.request(tc.ctx, &nats.Msg{Subject: "nowhere.at.all", Data: []byte("{}")})
			if !errors.Is(err, tc.want) {
				t.Errorf("request = %d, %v; want %v", seq, err, tc.want)
			}
		})
	}
}
