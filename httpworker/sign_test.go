package httpworker

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The worked example of docs/workers.md; workers/node/test/sign.test.mjs
// checks the same vector, so both sides agree on the recipe.
const (
	exampleSecret    = "example-secret"
	exampleTimestamp = 1767225600 // 2026-01-01T00:00:00Z
	exampleBody      = `{"session":"s1","trigger":{"type":"session.start","session":"s1"},"proposed":{}}`
	exampleSignature = "v1=9a336c65c3c3d9eba930b502d475021236d65ae4d42a3ebe856c7bd43b2df551"
)

func TestSignWorkedExample(t *testing.T) {
	if got := Sign([]byte(exampleSecret), exampleTimestamp, []byte(exampleBody)); got != exampleSignature {
		t.Fatalf("Sign = %s, want %s", got, exampleSignature)
	}
}

func TestVerify(t *testing.T) {
	secret := []byte(exampleSecret)
	body := []byte(exampleBody)
	now := time.Unix(exampleTimestamp, 0)
	good := exampleSignature
	ts := strconv.Itoa(exampleTimestamp)

	tests := []struct {
		name    string
		ts, sig string // "-" leaves the header out
		body    string
		now     time.Time
		window  time.Duration
		want    error
	}{
		{name: "valid", ts: ts, sig: good, now: now},
		{name: "valid at the edge of the window", ts: ts, sig: good, now: now.Add(DefaultWindow)},
		{name: "valid from a clock ahead by the window", ts: ts, sig: good, now: now.Add(-DefaultWindow)},
		{name: "one of several signatures matches", ts: ts, sig: "v0=abc, v1=00ff," + good, now: now},
		{name: "no headers", ts: "-", sig: "-", now: now, want: ErrNoSignature},
		{name: "no timestamp", ts: "-", sig: good, now: now, want: ErrNoSignature},
		{name: "no signature", ts: ts, sig: "-", now: now, want: ErrNoSignature},
		{name: "timestamp not a number", ts: "yesterday", sig: good, now: now, want: ErrBadTimestamp},
		{name: "timestamp in milliseconds is stale", ts: ts + "000", sig: Sign(secret, exampleTimestamp*1000, body), now: now, want: ErrStale},
		{name: "older than the window", ts: ts, sig: good, now: now.Add(DefaultWindow + time.Second), want: ErrStale},
		{name: "newer than the window", ts: ts, sig: good, now: now.Add(-DefaultWindow - time.Second), want: ErrStale},
		{name: "custom window", ts: ts, sig: good, now: now.Add(31 * time.Second), window: 30 * time.Second, want: ErrStale},
		{name: "wrong secret", ts: ts, sig: Sign([]byte("other"), exampleTimestamp, body), now: now, want: ErrBadSignature},
		{name: "body changed", ts: ts, sig: good, body: strings.Replace(exampleBody, "s1", "s2", 1), now: now, want: ErrBadSignature},
		{name: "timestamp changed", ts: strconv.Itoa(exampleTimestamp + 1), sig: good, now: now, want: ErrBadSignature},
		{name: "no scheme", ts: ts, sig: strings.TrimPrefix(good, "v1="), now: now, want: ErrBadSignature},
		{name: "not hex", ts: ts, sig: "v1=zz", now: now, want: ErrBadSignature},
		{name: "uppercase hex is the same bytes", ts: ts, sig: "v1=" + strings.ToUpper(strings.TrimPrefix(good, "v1=")), now: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if tt.ts != "-" {
				r.Header.Set(HeaderTimestamp, tt.ts)
			}
			if tt.sig != "-" {
				r.Header.Set(HeaderSignature, tt.sig)
			}
			b := body
			if tt.body != "" {
				b = []byte(tt.body)
			}
			err := Verify(secret, r, b, tt.now, tt.window)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), exampleSecret) {
				t.Fatalf("Verify's error %q contains the secret", err)
			}
		})
	}
}
