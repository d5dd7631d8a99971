package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/jsonfields"
)

// StatusError is an error a request is refused with, and its HTTP status.
type StatusError struct {
	Status int
	Err    error
}

func (e *StatusError) Error() string   { return e.Err.Error() }
func (e *StatusError) StatusCode() int { return e.Status }

// BadRequest is a request refused with 400.
func BadRequest(format string, args ...any) error {
	return &StatusError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// Refuse answers a refused request with status and err's text, and a
// Retry-After header when err says when to try again (a RetryAfter()
// time.Duration method: a rate limit).
func Refuse(w http.ResponseWriter, err error, status int) {
	var later interface{ RetryAfter() time.Duration }
	if errors.As(err, &later) && later.RetryAfter() > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(later.RetryAfter().Seconds()))))
	}
	Text(w, engine.PublicText(err), status)
}

// Text answers with status and text as plain text, as http.Error does but
// without its newline: every refusal of the gateway's routes goes through
// it, since a front end's client shows the text as it is (the AI SDK's
// chat.error.message).
func Text(w http.ResponseWriter, text string, status int) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// DecodeJSON reads the request's JSON body into v: 415 when it is not
// JSON, 400 when it is not what (named in the message), or the
// *http.MaxBytesError when it is too large.
func DecodeJSON(r *http.Request, v any, what string) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		// A media type's name is case-insensitive; its parameters (a
		// charset) are not read, and one that does not parse leaves the
		// type (mime.ErrInvalidMediaParameter).
		if mt, _, err := mime.ParseMediaType(ct); (err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter)) || mt != "application/json" {
			return &StatusError{http.StatusUnsupportedMediaType, fmt.Errorf("the body must be application/json, not %q", ct)}
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return BadRequest("the body is not %s: %v", what, err)
	}
	if !utf8.Valid(body) {
		// As /ws refuses a frame: a decoder would take the text with
		// U+FFFD in place of what the page meant.
		return BadRequest("the body is not %s: it is not valid UTF-8", what)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	err = dec.Decode(v)
	if err == nil {
		// One value, then nothing but white space.
		if _, next := dec.Token(); next != io.EOF {
			return BadRequest("the body is not %s: something follows the JSON value", what)
		}
	}
	if err != nil {
		var mistyped *json.UnmarshalTypeError
		if errors.As(err, &mistyped) {
			// Named by the body's own field path and JSON's words, not
			// by the gateway's Go types.
			where := "the body"
			if mistyped.Field != "" {
				where = strconv.Quote(mistyped.Field)
			}
			return BadRequest("the body is not %s: %s is %s, want %s", what, where, jsonfields.Article(mistyped.Value), jsonfields.Kind(mistyped.Type))
		}
		return BadRequest("the body is not %s: %v", what, err)
	}
	return nil
}

// Status is the HTTP status a request is refused with for err (which may
// carry one: a StatusCode() int method), and the error to answer with; bad
// are errors that mean 400 besides. Else 500.
func Status(err error, bad ...error) (int, error) {
	var coded interface{ StatusCode() int }
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &coded):
		return coded.StatusCode(), err
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is over %d bytes, the most the gateway reads", tooLarge.Limit)
	case errors.Is(err, engine.ErrBudgetSpent):
		return http.StatusForbidden, err // the chat takes no more messages: a new chat does
	case errors.Is(err, engine.ErrLimitExceeded):
		return http.StatusRequestEntityTooLarge, err
	}
	for _, b := range bad {
		if errors.Is(err, b) {
			return http.StatusBadRequest, err
		}
	}
	switch {
	case errors.Is(err, engine.ErrSessionClosed):
		return http.StatusGone, err
	case errors.Is(err, engine.ErrUnloaded):
		return http.StatusServiceUnavailable, fmt.Errorf("the chat is leaving this gateway's memory (its lease was lost, or the gateway stops): retry: %w", err)
	case errors.Is(err, engine.ErrStoreUnavailable):
		return http.StatusServiceUnavailable, err
	}
	return http.StatusInternalServerError, err
}

// Answer gives the session a client's answer to call id (a ToolResult or
// ToolError), and reports whether the call took it. One it cannot take (it
// settled: history, a duplicate, too late; or it is no client call) is
// skipped, logged at debug level as what: its outcome is in the stream.
// Only a failure of the session is an error.
func Answer(ctx context.Context, sess *engine.Session, id string, a engine.Action, log *slog.Logger, what string) (bool, error) {
	err := sess.Answer(ctx, a)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, engine.ErrSettled), errors.Is(err, engine.ErrStaleAttempt), errors.Is(err, engine.ErrUnknownCall):
		log.Debug(what, "session", sess.ID(), "call", id, "err", err)
		return false, nil
	}
	return false, fmt.Errorf("failed to answer tool call %s: %w", id, err)
}

// Approve takes an app's answer to a call's approval, as Answer takes an
// answer: one the call cannot take (it settled, was approved already) is
// skipped, and reports false; one with another digest, or for a call that
// asks none, is the request's error (400).
func Approve(ctx context.Context, sess *engine.Session, a engine.ToolApprove, log *slog.Logger, what string) (bool, error) {
	err := sess.Approve(ctx, a)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, engine.ErrSettled), errors.Is(err, engine.ErrUnknownCall):
		log.Debug(what, "session", sess.ID(), "call", a.ID, "err", err)
		return false, nil
	case errors.Is(err, engine.ErrBadRequest):
		return false, &StatusError{http.StatusBadRequest, fmt.Errorf("the approval of %s: %w", a.ID, err)}
	}
	return false, fmt.Errorf("failed to approve tool call %s: %w", a.ID, err)
}
