package jetstream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// errDenied: the NATS server refused this node's user a request's subject
// (its permissions). Asking again does not change it.
var errDenied = errors.New("this node's NATS user may not do this")

// denials ends at once the JetStream API requests the server refuses for
// this node's NATS user. The server says so apart from the request, as an
// asynchronous error on the connection (a permissions violation naming the
// subject); the request itself gets no answer and would wait for its
// timeout, which made a node whose user may not edit streams wait 5 s at
// start for each bucket it could not raise, and a step wait as long for
// the journal's format mark.
//
// Concurrency: watch and refused are safe for concurrent use; refused runs
// on the connection's callback goroutine.
type denials struct {
	mu      sync.Mutex
	waiting map[*deniable]struct{}
}

// deniable is one request in flight: the API subject it publishes to, from
// "STREAM." on (the account's API prefix before it varies), and how to end
// it.
type deniable struct {
	api    string
	cancel context.CancelCauseFunc
}

// watch returns ctx for a request to the JetStream API subject api (from
// "STREAM." on, "STREAM.UPDATE.<stream>" say), which ends with errDenied
// when the server refuses this node that subject, and the function that
// stops watching, to call once the request returned.
func (d *denials) watch(ctx context.Context, api string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &deniable{api: api, cancel: cancel}
	d.mu.Lock()
	if d.waiting == nil {
		d.waiting = map[*deniable]struct{}{}
	}
	d.waiting[w] = struct{}{}
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		delete(d.waiting, w)
		d.mu.Unlock()
		cancel(nil)
	}
}

// deniedSubject finds the subject a permissions violation names.
var deniedSubject = regexp.MustCompile(`Publish to "([^"]+)"`)

// refused ends the requests in flight to the subject a connection error
// says the server refused this node's user; other errors are not its.
func (d *denials) refused(err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := deniedSubject.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	subject := m[1]
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiting {
		if strings.HasSuffix(subject, "."+w.api) {
			w.cancel(fmt.Errorf("%w: the server refused it %s (%w): give the user that permission, or do it with a user that has it", errDenied, subject, err))
		}
	}
}

// request runs f, a JetStream API request to api (see watch), with a
// context that ends once the server refuses the subject, and returns the
// refusal rather than the context's end.
func request[T any](ctx context.Context, d *denials, api string, f func(context.Context) (T, error)) (T, error) {
	rctx, done := d.watch(ctx, api)
	defer done()
	v, err := f(rctx)
	if err != nil {
		if cause := context.Cause(rctx); errors.Is(cause, errDenied) {
			return v, cause
		}
	}
	return v, err
}
