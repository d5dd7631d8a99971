package jetstream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// TestRedactedURLs: what the gateway says of the NATS servers (its start's
// line, its errors) names them without their passwords or tokens.
func TestRedactedURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://u:s3cret@a:4222, nats://b:4222", "nats://u:xxxxx@a:4222, nats://b:4222"},
		{"nats://t0ken@a:4222", "nats://xxxxx@a:4222"},
	} {
		if got := jetstream.RedactedURLs(tc.in); got != tc.want || strings.Contains(got, "s3cret") || strings.Contains(got, "t0ken") {
			t.Errorf("jetstream.RedactedURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestErrorsKeepThePasswordOut: a store's refusal names the NATS server
// without the password in its URL (an outside audit found it in clear on
// stderr, whence it reaches the service's logs).
func TestErrorsKeepThePasswordOut(t *testing.T) {
	addr := strings.TrimPrefix(natstest.Server(t, []*server.User{{Username: "gw", Password: "s3cretpw"}}), "nats://")
	url := "nats://gw:s3cretpw@" + addr
	// Attached to a NATS that holds no gateway store: refused, naming it.
	_, err := jetstream.Open(context.Background(), jetstream.Options{URL: url, Attach: true, Node: "admin"})
	if err == nil || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("the refusal: %v, want the server named without its password", err)
	}
}
