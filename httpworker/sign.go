package httpworker

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clienttools/gateway/clip"
)

// Header names of the protocol.
const (
	// HeaderTimestamp carries the time the request was signed, in unix
	// seconds.
	HeaderTimestamp = "X-Gateway-Timestamp"
	// HeaderSignature carries "v1=" and the hex HMAC-SHA256 of
	// "<timestamp>.<body>" keyed with the shared secret.
	HeaderSignature = "X-Gateway-Signature"
	// HeaderDeadline carries, in RFC 3339 with milliseconds, when the gateway
	// stops waiting for the answer. On tool.execute it is the attempt's
	// deadline. It is not signed: the trigger's own deadline field, in the
	// signed body, is authoritative.
	HeaderDeadline = "X-Gateway-Deadline"
)

// DefaultWindow is how far a request's timestamp may be from the verifier's
// clock, either way, before Verify refuses it as a replay.
const DefaultWindow = 5 * time.Minute

// signatureScheme prefixes every signature, so the recipe can change without
// breaking verifiers that know the old one.
const signatureScheme = "v1="

// Sentinel errors of Verify, for errors.Is.
var (
	// ErrNoSignature: the timestamp or signature header is missing.
	ErrNoSignature = errors.New("request is not signed")
	// ErrBadTimestamp: the timestamp header is not unix seconds.
	ErrBadTimestamp = errors.New("bad signature timestamp")
	// ErrStale: the timestamp is outside the replay window.
	ErrStale = errors.New("signature timestamp outside the replay window")
	// ErrBadSignature: no signature in the header matches the body and
	// timestamp under the secret.
	ErrBadSignature = errors.New("signature does not match")
)

// Sign returns the X-Gateway-Signature value for body sent at timestamp
// (unix seconds): "v1=" and the lowercase hex HMAC-SHA256, keyed with secret,
// of the timestamp in decimal, a ".", and the body bytes exactly as sent.
func Sign(secret []byte, timestamp int64, body []byte) string {
	return signatureScheme + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that r, whose body is body, was signed with secret no more
// than window away from now (either way; zero means DefaultWindow). It
// returns nil or an error wrapping ErrNoSignature, ErrBadTimestamp, ErrStale
// or ErrBadSignature; the errors never contain the secret or the expected
// signature, so they are safe to send back in a 401.
//
// The signature header may list several comma-separated "v1=" entries; one
// match is enough. Entries of other schemes are skipped. The window bounds
// replays but does not prevent them within it: a worker that must not run a
// request twice de-duplicates by the trigger's session, id and attempt.
func Verify(secret []byte, r *http.Request, body []byte, now time.Time, window time.Duration) error {
	if window <= 0 {
		window = DefaultWindow
	}
	ts := strings.TrimSpace(r.Header.Get(HeaderTimestamp))
	sig := strings.TrimSpace(r.Header.Get(HeaderSignature))
	switch {
	case ts == "" && sig == "":
		return fmt.Errorf("%w: no %s or %s header", ErrNoSignature, HeaderTimestamp, HeaderSignature)
	case ts == "":
		return fmt.Errorf("%w: no %s header", ErrNoSignature, HeaderTimestamp)
	case sig == "":
		return fmt.Errorf("%w: no %s header", ErrNoSignature, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec < 0 {
		return fmt.Errorf("%w: %s is %q, want unix seconds", ErrBadTimestamp, HeaderTimestamp, clip.Marked(ts, 32, "..."))
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > window || skew < -window {
		return fmt.Errorf("%w: signed at %s, %s from now; the window is %s", ErrStale,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), skew.Round(time.Second), window)
	}
	want := mac(secret, ts, body)
	for entry := range strings.SplitSeq(sig, ",") {
		entry = strings.TrimSpace(entry)
		hexSig, ok := strings.CutPrefix(entry, signatureScheme)
		if !ok {
			continue
		}
		got, err := hex.DecodeString(hexSig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: check that the gateway and the worker share the same secret", ErrBadSignature)
}
