package jetstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/nats-io/nats.go/jetstream"
)

// Cookies returns an scs.Store that keeps the browsers' cookie sessions in
// the JetStream bucket beside the journals, so a browser is recognised after
// a restart and on every node of a cluster. Entries expire when scs says,
// and the bucket forgets an entry untouched for CookieLifetime.
func (s *Store) Cookies() scs.Store { return cookieStore{kv: s.cookies} }

type cookieStore struct{ kv jetstream.KeyValue }

var _ scs.CtxStore = cookieStore{}

// The value is the expiry (Unix nanoseconds, 8 bytes) and the session's data.

func (c cookieStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	if !validToken(token) {
		return nil, false, nil
	}
	e, err := c.kv.Get(ctx, token)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("failed to read a cookie session: %w", err)
	}
	v := e.Value()
	if len(v) < 8 || time.Now().UnixNano() > int64(binary.BigEndian.Uint64(v)) {
		return nil, false, nil
	}
	return v[8:], true, nil
}

func (c cookieStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if !validToken(token) {
		return fmt.Errorf("cookie token %q cannot be a key", token)
	}
	v := make([]byte, 8+len(b))
	binary.BigEndian.PutUint64(v, uint64(expiry.UnixNano()))
	copy(v[8:], b)
	if _, err := c.kv.Put(ctx, token, v); err != nil {
		return fmt.Errorf("failed to store a cookie session: %w", err)
	}
	return nil
}

func (c cookieStore) DeleteCtx(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	if err := c.kv.Delete(ctx, token); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("failed to delete a cookie session: %w", err)
	}
	return nil
}

func (c cookieStore) Find(token string) ([]byte, bool, error) {
	return c.FindCtx(context.Background(), token)
}

func (c cookieStore) Commit(token string, b []byte, expiry time.Time) error {
	return c.CommitCtx(context.Background(), token, b, expiry)
}

func (c cookieStore) Delete(token string) error { return c.DeleteCtx(context.Background(), token) }

// validToken: scs tokens are base64url, which is a valid key; anything else
// (a forged cookie) is not looked up.
func validToken(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
