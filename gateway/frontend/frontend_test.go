package frontend_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway/frontend"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPending: a response ends with calls pending only when every open
// call is a client call this stream delivered.
func TestPending(t *testing.T) {
	ctx := context.Background()
	deliver := func(c *frontend.Calls, id string) {
		if !c.Delivered(ctx, nil, engine.ClientCall{ID: id}) {
			t.Fatalf("a call without proposed input is not for the client to run")
		}
	}
	tests := []struct {
		name string
		do   func(c *frontend.Calls)
		want []string
	}{
		{"no calls", func(c *frontend.Calls) {}, nil},
		{"a delivered call", func(c *frontend.Calls) { c.Started("a"); deliver(c, "a") }, []string{"a"}},
		{"two delivered", func(c *frontend.Calls) { deliver(c, "a"); deliver(c, "b") }, []string{"a", "b"}},
		{"a worker call still runs", func(c *frontend.Calls) { c.Started("w"); deliver(c, "a") }, nil},
		{"the worker call finished", func(c *frontend.Calls) { c.Started("w"); deliver(c, "a"); c.Finished("w") }, []string{"a"}},
		{"cancelled: waits on another page", func(c *frontend.Calls) {
			deliver(c, "a")
			if !c.See(engine.Event{Type: engine.FrameToolCancel, Frame: []byte(`{"id":"a","attempt":1}`)}) {
				t.Errorf("the cancel of the session's own call is not shown")
			}
		}, nil},
		{"finished stays finished", func(c *frontend.Calls) { deliver(c, "a"); c.Finished("a"); deliver(c, "a"); c.Started("a") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c frontend.Calls
			tt.do(&c)
			got := c.Pending()
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Pending() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatus: a refused request's status, for the errors a handler meets.
func TestStatus(t *testing.T) {
	tests := []struct {
		err  error
		bad  []error
		want int
	}{
		{frontend.BadRequest("no id"), nil, http.StatusBadRequest},
		{&http.MaxBytesError{Limit: 10}, nil, http.StatusRequestEntityTooLarge},
		{fmt.Errorf("send: %w", engine.ErrLimitExceeded), nil, http.StatusRequestEntityTooLarge},
		{fmt.Errorf("send: %w: used 300 tokens, its budget", engine.ErrBudgetSpent), nil, http.StatusForbidden},
		{fmt.Errorf("attach: %w", engine.ErrBadRequest), nil, http.StatusInternalServerError},
		{fmt.Errorf("attach: %w", engine.ErrBadRequest), []error{engine.ErrBadRequest}, http.StatusBadRequest},
		{engine.ErrSessionClosed, nil, http.StatusGone},
		{fmt.Errorf("attach: %w", engine.ErrUnloaded), nil, http.StatusServiceUnavailable},
		{engine.ErrStoreUnavailable, nil, http.StatusServiceUnavailable},
		{errors.New("boom"), nil, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got, _ := frontend.Status(tt.err, tt.bad...); got != tt.want {
			t.Errorf("Status(%v, %v) = %d, want %d", tt.err, tt.bad, got, tt.want)
		}
	}
	_, err := frontend.Status(&http.MaxBytesError{Limit: 10})
	if !strings.Contains(err.Error(), "over 10 bytes") {
		t.Errorf("a body over the limit is answered %q, want it to name the limit", err)
	}
}

// TestDecodeJSON: a body that is not JSON, or not the request, is refused
// with its status.
func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		ct, body string
		want     int
		says     string // the error's text ends so
	}{
		{"application/json", `{"id":"x"}`, 0, ""},
		{"", `{"id":"x"}`, 0, ""},
		{"text/plain", `{"id":"x"}`, http.StatusUnsupportedMediaType, `not "text/plain"`},
		{"application/json", `{"id":`, http.StatusBadRequest, "unexpected EOF"},
		// A mistyped field is named as the body names it, in JSON's words,
		// not the gateway's Go types.
		{"application/json", `{"id":5}`, http.StatusBadRequest, `"id" is a number, want a string`},
		{"application/json", `{"parts":[{"text":true}]}`, http.StatusBadRequest, `"parts.text" is a boolean, want a string`},
		{"application/json", `{"parts":{}}`, http.StatusBadRequest, `"parts" is an object, want an array`},
		{"application/json", `[]`, http.StatusBadRequest, `the body is an array, want an object`},
		// As /ws: not read with U+FFFD in place of what was sent.
		{"application/json", "{\"id\":\"\xff\"}", http.StatusBadRequest, "it is not valid UTF-8"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", tt.ct)
		var v struct {
			ID    string `json:"id"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		}
		err := frontend.DecodeJSON(r, &v, "a request")
		got := 0
		if err != nil {
			got, _ = frontend.Status(err)
		}
		if got != tt.want || (tt.says != "" && !strings.HasSuffix(err.Error(), tt.says)) {
			t.Errorf("DecodeJSON(%q, %q): status %d (%v), want %d, ending %q", tt.ct, tt.body, got, err, tt.want, tt.says)
		}
	}
}
