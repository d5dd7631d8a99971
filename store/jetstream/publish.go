package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// apiTimeout bounds a publish whose context has none, as the JetStream
// client's own calls are bounded.
const apiTimeout = 5 * time.Second

// publish stores data on subj if the subject's last message in its stream
// is expectLast (0: it has none), and returns the new message's stream
// sequence. It is the client's Publish with
// WithExpectLastSequencePerSubject, the same request and the same retries
// when no server answers, but it reads the server's usual ack without
// encoding/json (quickAck): that decoding was 3% of the gateway's CPU on
// JetStream, for two numbers. Any other answer is read as the client
// reads it; a refusal is a *jetstream.APIError.
func (s *Store) publish(ctx context.Context, subj string, data []byte, expectLast uint64) (uint64, error) {
	return s.request(ctx, &nats.Msg{Subject: subj, Data: data, Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(expectLast, 10)},
	}})
}

// put stores data on subj whatever came before it: a key-value bucket's
// Put, which is a publish on the key's subject, read as publish reads it.
func (s *Store) put(ctx context.Context, subj string, data []byte) error {
	_, err := s.request(ctx, &nats.Msg{Subject: subj, Data: data})
	return err
}

// request publishes msg to its stream and reads the server's answer.
func (s *Store) request(ctx context.Context, msg *nats.Msg) (uint64, error) {
	// The engine's appends and summaries come with a context that never
	// ends: the client's timed request bounds the wait with a pooled
	// timer, where a context with a timeout makes and stops one per
	// request (2 to 3 µs of each).
	ask := func() (*nats.Msg, error) { return s.nc.RequestMsg(msg, apiTimeout) }
	if ctx.Done() != nil {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, apiTimeout)
			defer cancel()
		}
		ask = func() (*nats.Msg, error) { return s.nc.RequestMsgWithContext(ctx, msg) }
	}
	resp, err := ask()
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		// A stream's leader may be changing: as the client does, wait and
		// ask again.
		select {
		case <-ctx.Done():
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
		resp, err = ask()
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, err
	}
	return readAck(resp.Data)
}

// readAck reads a JetStream publish's answer: the stored message's
// sequence, or the server's refusal.
func readAck(data []byte) (uint64, error) {
	if seq, ok := quickAck(data); ok {
		return seq, nil
	}
	var ack struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		jetstream.PubAck
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return ack.Sequence, nil
}

// quickAck reads the ack a server sends for a new message,
// {"stream":"NAME","seq":N}, and reports false for anything else (a
// duplicate, a domain, an error, other spacing), which readAck reads with
// encoding/json.
func quickAck(data []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"stream":"`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return 0, false
	}
	for _, c := range rest[:end] {
		if c < 0x20 || c == '\\' { // not JSON, or an escape: encoding/json's to read
			return 0, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"seq":`)); !ok {
		return 0, false
	}
	digits, ok := bytes.CutSuffix(rest, []byte(`}`))
	if !ok || len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(string(digits), 10, 64)
	return seq, err == nil
}
