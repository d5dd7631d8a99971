package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrSessionClosed: the session has ended and takes no more input.
	ErrSessionClosed = errors.New("session closed")
	// ErrUnknownCall: an action or answer names a call id the session never had.
	ErrUnknownCall = errors.New("unknown tool call")
	// ErrSettled: the call has already settled.
	ErrSettled = errors.New("tool call already settled")
	// ErrStaleAttempt: the answer is for an attempt that is no longer current.
	ErrStaleAttempt = errors.New("attempt is no longer current")
	// ErrBadDecision: the worker's decision cannot be carried out.
	ErrBadDecision = errors.New("bad decision")
	// ErrBadConfig: the agent config cannot be used (bad schema, no model).
	ErrBadConfig = errors.New("bad agent config")
	// ErrBadRequest: a request names something that cannot be (an empty
	// tool name, an after beyond the session's last event). Its text says
	// what.
	ErrBadRequest = errors.New("bad request")
	// ErrWorker: the worker failed (returned an error or panicked).
	ErrWorker = errors.New("worker failed")
	// ErrAttemptTimedOut is the cause (context.Cause) of a worker
	// attempt's context that its timeout ended: a worker, or what
	// measures it, tells that from a call stopped or ended otherwise.
	ErrAttemptTimedOut = errors.New("the tool call's attempt timed out")
)

// PublicText is what pages and the model may read of err: the public text
// of an error that has one (an HTTP worker's failure, whose own text names
// the worker's address and quotes its answer for the operator's log),
// else err's own text.
func PublicText(err error) string {
	if p, ok := errors.AsType[interface {
		error
		PublicText() string
	}](err); ok {
		return p.PublicText()
	}
	return err.Error()
}

// RequestError is an ErrBadRequest: What says what was wrong, in words a
// client can act on, without the kind's name, which a transport says in
// its own words (the gateway's "bad frame", an HTTP 400).
type RequestError struct {
	What string
	Err  error // what it wraps, if anything
}

func (e *RequestError) Error() string        { return ErrBadRequest.Error() + ": " + e.What }
func (e *RequestError) Is(target error) bool { return target == ErrBadRequest }
func (e *RequestError) Unwrap() error        { return e.Err }

// badRequest is a RequestError saying what was wrong.
func badRequest(format string, args ...any) error {
	return &RequestError{What: fmt.Sprintf(format, args...)}
}
