package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestDenials: a permissions violation ends the requests in flight to the
// subject it names, whatever the account's API prefix, and no other.
func TestDenials(t *testing.T) {
	violation := func(subject string) error {
		return fmt.Errorf("%w: Permissions Violation for Publish to %q", nats.ErrPermissionViolation, subject)
	}
	for _, tc := range []struct {
		name   string
		api    string
		err    error
		denied bool
	}{
		{"its subject", "STREAM.UPDATE.j", violation("$JS.API.STREAM.UPDATE.j"), true},
		{"a domain's prefix", "STREAM.UPDATE.j", violation("$JS.hub.API.STREAM.UPDATE.j"), true},
		{"another stream", "STREAM.UPDATE.j", violation("$JS.API.STREAM.UPDATE.KV_j"), false},
		{"another stream ending alike", "STREAM.UPDATE.j", violation("$JS.API.STREAM.UPDATE.xj"), false},
		{"another request", "STREAM.INFO.j", violation("$JS.API.STREAM.UPDATE.j"), false},
		{"a subscription's", "STREAM.UPDATE.j", fmt.Errorf("%w: Permissions Violation for Subscription to \"$JS.API.STREAM.UPDATE.j\"", nats.ErrPermissionViolation), false},
		{"another error", "STREAM.UPDATE.j", errors.New(`Publish to "$JS.API.STREAM.UPDATE.j"`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d denials
			ctx, done := d.watch(context.Background(), tc.api)
			defer done()
			d.refused(tc.err)
			cause := context.Cause(ctx)
			if got := errors.Is(cause, errDenied); got != tc.denied {
				t.Fatalf("denied %v (cause %v), want %v", got, cause, tc.denied)
			}
			if tc.denied && !errors.Is(cause, nats.ErrPermissionViolation) {
				t.Errorf("the cause %q does not carry the server's refusal", cause)
			}
		})
	}
	var d denials
	_, done := d.watch(context.Background(), "STREAM.UPDATE.j")
	done()
	if len(d.waiting) != 0 {
		t.Errorf("%d requests still watched after they returned", len(d.waiting))
	}
}
