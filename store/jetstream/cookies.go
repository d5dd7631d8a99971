package jetstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cookies returns an scs.Store that keeps the browsers' cookie sessions in
// the JetStream bucket beside the journals, so a browser is recognised after
// a restart and on every node of a cluster. Entries expire when scs says,
// and the bucket forgets an entry untouched for CookieLifetime.
func (s *Store) Cookies() scs.Store { return cookieStore{s} }

type cookieStore struct{ s *Store }

var _ scs.CtxStore = cookieStore{}

// The value is the expiry (Unix nanoseconds, 8 bytes) and the session's data.

func (c cookieStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	if !validToken(token) {
		return nil, false, nil
	}
	e, err := c.s.cookies.Get(ctx, token)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// The get is direct: any replica answers it, and one a moment
		// behind has not got an identity made on any node just now (a
		// browser's page, then its WebSocket). Said not found, the browser
		// would get a new identity in its place, and lose its chats. The
		// stream's leader has every write it acknowledged.
		return c.leaderGet(ctx, token)
	}
	if errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: failed to read a cookie session: %w", engine.ErrStoreUnavailable, err)
	}
	data, ok := unexpired(e.Value())
	return data, ok, nil
}

// leaderGetWait bounds leaderGet, as nats.go bounds its own requests.
const leaderGetWait = 5 * time.Second

// leaderGet reads token's entry through the bucket's stream leader, with
// JetStream's message get, which a direct get's replicas do not answer.
func (c cookieStore) leaderGet(ctx context.Context, token string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderGetWait)
	defer cancel()
	var answer struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
	}
	api := "STREAM.MSG.GET." + kvStream(CookieBucket)
	_, err := request(ctx, &c.s.denials, api, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, apiRequest(ctx, c.s.nc, "$JS.API."+api, map[string]string{"last_by_subj": "$KV." + CookieBucket + "." + token}, &answer)
	})
	if errors.Is(err, errDenied) {
		// A user deploy.md's permissions do not cover: the direct get's
		// answer stands, as it did before the leader was asked.
		if !c.s.leaderGetDenied.Swap(true) {
			c.s.opts.Logger.Warn("the NATS user may not read the identities through their stream's leader: on a cluster, a browser whose identity was made a moment ago on another node may be given a new one (deploy.md, The NATS user)", "err", err)
		}
		return nil, false, nil
	}
	if err == nil {
		switch {
		case answer.Error != nil && answer.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
			return nil, false, nil
		case answer.Error != nil:
			err = answer.Error
		case answer.Message == nil:
			err = errors.New("an answer without the message")
		}
	}
	var h nats.Header
	if err == nil && len(answer.Message.Header) > 0 {
		h, err = nats.DecodeHeadersMsg(answer.Message.Header)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: failed to read a cookie session from its stream's leader: %w", engine.ErrStoreUnavailable, err)
	}
	if h.Get(kvOperation) != "" {
		return nil, false, nil // a deletion's marker (DEL, PURGE)
	}
	data, ok := unexpired(answer.Message.Data)
	return data, ok, nil
}

// kvOperation is the header a key-value bucket's deletion markers carry.
const kvOperation = "KV-Operation"

// unexpired is an entry's session data, and false when the entry is too
// short to hold its expiry or the expiry passed.
func unexpired(v []byte) ([]byte, bool) {
	if len(v) < 8 || time.Now().UnixNano() > int64(binary.BigEndian.Uint64(v)) {
		return nil, false
	}
	return v[8:], true
}

func (c cookieStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if !validToken(token) {
		return fmt.Errorf("cookie token %q cannot be a key", token)
	}
	v := make([]byte, 8+len(b))
	binary.BigEndian.PutUint64(v, uint64(expiry.UnixNano()))
	copy(v[8:], b)
	if _, err := c.s.cookies.Put(ctx, token, v); err != nil {
		return fmt.Errorf("%w: failed to store a cookie session: %w", engine.ErrStoreUnavailable, err)
	}
	return nil
}

func (c cookieStore) DeleteCtx(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	if err := c.s.cookies.Delete(ctx, token); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: failed to delete a cookie session: %w", engine.ErrStoreUnavailable, err)
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

// legacyFreshCookieBucket is where versions of 2026-12-05 (db671af to
// 81f1ca7) kept a browser's identity from its first visit until its next,
// for at most two hours. This version reads only CookieBucket.
const legacyFreshCookieBucket = "GATEWAY_COOKIES_NEW"

// takeFreshCookies copies the identities still alive in
// legacyFreshCookieBucket into the cookies' bucket, where it has none of
// the same token, so a browser whose only visit was under such a version
// keeps its chats. On the embedded server, whose one node is this one, the
// bucket is deleted once copied; on a NATS the nodes share, a node of that
// version may still write to it, so it stays, and the log says when it may
// go (what such a node writes after this start is read after the next).
func (s *Store) takeFreshCookies(ctx context.Context) error {
	fresh, err := s.js.KeyValue(ctx, legacyFreshCookieBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	lister, err := fresh.ListKeys(ctx)
	if err != nil {
		return err
	}
	var tokens []string // read whole first: the lister's goroutine ends once its channel is
	for token := range lister.Keys() {
		tokens = append(tokens, token)
	}
	taken := 0
	for _, token := range tokens {
		e, err := fresh.Get(ctx, token)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return err
		}
		if _, live := unexpired(e.Value()); !live || !validToken(token) {
			continue
		}
		if _, err := s.cookies.Create(ctx, token, e.Value()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		taken++
	}
	if s.embedded != nil {
		if err := s.js.DeleteKeyValue(ctx, legacyFreshCookieBucket); err != nil {
			return err
		}
		s.opts.Logger.Info("took the identities an earlier version kept apart", "identities", taken)
		return nil
	}
	s.opts.Logger.Info("took the identities an earlier version kept apart; once no gateway of 2026-12-05 (db671af to 81f1ca7) runs, delete their bucket: nats kv del "+legacyFreshCookieBucket,
		"identities", taken)
	return nil
}

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
