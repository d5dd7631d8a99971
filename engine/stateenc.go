package engine

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
)

// The session's state is encoded on every step (snapshot), so it is
// written by hand instead of by encoding/json's reflection: appendState
// writes exactly the bytes json.Marshal writes for a sessionState (the
// tests hold it to that, stateenc_internal_test.go), so the journal and rebuild.go are
// unchanged. The parts that are rare or rich (the agent, a queued
// trigger's decision) and the values encoding/json would refuse or write
// in an unusual form go through json.Marshal.

// appendState appends st as json.Marshal(st) writes it.
func appendState(b []byte, st *sessionState) ([]byte, error) {
	var err error
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(st.V), 10)
	b = appendStringField(b, `,"owner":`, st.Owner)
	b = append(b, `,"created":`...)
	if b, err = appendTime(b, st.Created); err != nil {
		return nil, err
	}
	b = append(b, `,"updated":`...)
	if b, err = appendTime(b, st.Updated); err != nil {
		return nil, err
	}
	b = appendStringField(b, `,"title":`, st.Title)
	if st.Agent != nil {
		b = append(b, `,"agent":`...)
		if b, err = appendMarshal(b, st.Agent); err != nil {
			return nil, err
		}
	}
	if len(st.Calls) > 0 {
		b = append(b, `,"calls":[`...)
		for i := range st.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCallState(b, &st.Calls[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendIntField(b, `,"nextCall":`, st.NextCall)
	b = appendIntField(b, `,"batches":`, st.Batches)
	if len(st.Queue) > 0 {
		b = append(b, `,"queue":[`...)
		for i, q := range st.Queue {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"trigger":`...)
			if b, err = appendRaw(b, q.Trigger); err != nil {
				return nil, err
			}
			b = append(b, `,"proposed":`...)
			if b, err = appendMarshal(b, q.Proposed); err != nil {
				return nil, err
			}
			if q.Announced {
				b = append(b, `,"announced":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(st.Waiting) > 0 {
		b = append(b, `,"waiting":`...)
		b = appendStrings(b, st.Waiting)
	}
	if len(st.WaitingIDs) > 0 {
		b = append(b, `,"waitingIds":`...)
		b = appendStrings(b, st.WaitingIDs)
	}
	b = appendBoolField(b, `,"prompt":true`, st.Prompt)
	b = appendBoolField(b, `,"turn":true`, st.Turn)
	b = appendBoolField(b, `,"idle":true`, st.Idle)
	b = appendBoolField(b, `,"ended":true`, st.Ended)
	if len(st.Declared) > 0 {
		b = append(b, `,"declared":[`...)
		for i, set := range st.Declared {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStrings(b, set)
		}
		b = append(b, ']')
	}
	// omitzero: the zero usage, and only that (an empty, non-nil map of
	// calls is not zero).
	if u := &st.Usage; u.ModelTurns != 0 || u.MessageTokens != 0 || u.SessionTokens != 0 || u.Calls != nil || u.Granted || u.BudgetTripped {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, u)
	}
	return appendRunsEnd(b, st.Runs), nil
}

// appendRunsEnd ends a state: its runs, last (runsEnd), and the brace.
func appendRunsEnd(b []byte, runs []runMark) []byte {
	if len(runs) > 0 {
		b = append(b, `,"runs":[`...)
		for i, r := range runs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"epoch":`...)
			b = AppendJSONString(b, r.Epoch)
			b = append(b, `,"end":`...)
			b = strconv.AppendInt(b, r.End, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendCallState(b []byte, c *callState) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = AppendJSONString(b, c.ID)
	b = appendStringField(b, `,"name":`, c.Name)
	b = append(b, `,"handler":`...)
	b = AppendJSONString(b, string(c.Handler))
	b = appendBoolField(b, `,"settled":true`, c.Settled)
	b = appendIntField(b, `,"answeredBy":`, c.AnsweredBy)
	b = appendStringField(b, `,"args":`, c.Args)
	if c.Spec != nil {
		b = append(b, `,"spec":`...)
		if b, err = appendSpec(b, c.Spec); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, `,"specErr":`, c.SpecErr)
	if c.Input != nil {
		b = append(b, `,"input":{"status":`...)
		b = AppendJSONString(b, c.Input.Status)
		if len(c.Input.Value) > 0 {
			b = append(b, `,"value":`...)
			if b, err = appendRaw(b, c.Input.Value); err != nil {
				return nil, err
			}
		}
		b = appendStringField(b, `,"error":`, c.Input.Error)
		b = append(b, '}')
	}
	if c.Proposed != nil {
		b = append(b, `,"proposed":`...)
		if b, err = appendToolError(b, c.Proposed); err != nil {
			return nil, err
		}
	}
	b = appendIntField(b, `,"batch":`, c.Batch)
	b = appendBoolField(b, `,"cancelled":true`, c.Cancelled)
	b = appendIntField(b, `,"seq":`, c.Seq)
	b = appendIntField(b, `,"attempt":`, c.Attempt)
	if !c.Deadline.IsZero() {
		b = append(b, `,"deadline":`...)
		if b, err = appendTime(b, c.Deadline); err != nil {
			return nil, err
		}
	}
	if !c.Started.IsZero() {
		b = append(b, `,"started":`...)
		if b, err = appendTime(b, c.Started); err != nil {
			return nil, err
		}
	}
	b = appendBoolField(b, `,"backingOff":true`, c.BackingOff)
	if !c.RetryAt.IsZero() {
		b = append(b, `,"retryAt":`...)
		if b, err = appendTime(b, c.RetryAt); err != nil {
			return nil, err
		}
	}
	if !c.AttemptStarted.IsZero() {
		b = append(b, `,"attemptStarted":`...)
		if b, err = appendTime(b, c.AttemptStarted); err != nil {
			return nil, err
		}
	}
	b = appendBoolField(b, `,"reached":true`, c.Reached)
	b = appendBoolField(b, `,"awaitsPage":true`, c.AwaitsPage)
	b = appendBoolField(b, `,"notTwice":true`, c.NotTwice)
	b = appendBoolField(b, `,"approving":true`, c.Approving)
	if c.Finished != nil {
		// ToolFinished is a trigger: its MarshalJSON puts the type first.
		b = append(b, `,"finished":{"type":"`+TypeToolFinished+`","id":`...)
		b = AppendJSONString(b, c.Finished.ID)
		if c.Finished.OK {
			b = append(b, `,"ok":true,"name":`...)
		} else {
			b = append(b, `,"ok":false,"name":`...)
		}
		b = AppendJSONString(b, c.Finished.Name)
		if c.Finished.OK {
			b = append(b, `,"result":`...) // "" too, as its MarshalJSON
			b = AppendJSONString(b, c.Finished.Result)
		} else {
			b = appendStringField(b, `,"result":`, c.Finished.Result)
		}
		b = appendStringField(b, `,"error":`, c.Finished.Error)
		b = append(b, '}')
	}
	if c.FinishedSeq != 0 {
		b = append(b, `,"finishedSeq":`...)
		b = strconv.AppendInt(b, c.FinishedSeq, 10)
	}
	return append(b, '}'), nil
}

func appendSpec(b []byte, s *specState) ([]byte, error) {
	var err error
	b = append(b, `{"attempts":`...)
	b = strconv.AppendInt(b, int64(s.Attempts), 10)
	b = append(b, `,"timeout":`...)
	b = strconv.AppendInt(b, int64(s.Timeout), 10)
	b = append(b, `,"backoff":`...)
	b = strconv.AppendInt(b, int64(s.Backoff), 10)
	b = append(b, `,"multiplier":`...)
	if b, err = appendFloat(b, s.Multiplier); err != nil {
		return nil, err
	}
	b = append(b, `,"maxBackoff":`...)
	b = strconv.AppendInt(b, int64(s.MaxBackoff), 10)
	if s.MaxTimeout != 0 {
		b = append(b, `,"maxTimeout":`...)
		b = strconv.AppendInt(b, int64(s.MaxTimeout), 10)
	}
	return append(b, '}'), nil
}

// appendToolError appends e as its MarshalJSON writes it: an action, with
// its type first.
func appendToolError(b []byte, e *ToolError) ([]byte, error) {
	var err error
	b = append(b, `{"type":"`+TypeToolError+`"`...)
	b = appendStringField(b, `,"id":`, e.ID)
	b = appendIntField(b, `,"attempt":`, e.Attempt)
	b = append(b, `,"error":`...)
	b = AppendJSONString(b, e.Error)
	b = appendBoolField(b, `,"retryable":true`, e.Retryable)
	b = appendStringField(b, `,"code":`, string(e.Code))
	if len(e.Detail) > 0 {
		b = append(b, `,"detail":`...)
		if b, err = appendRaw(b, e.Detail); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendUsage(b []byte, u *usage) []byte {
	b = append(b, '{')
	n := len(b)
	b = appendIntField(b, `,"modelTurns":`, u.ModelTurns)
	b = appendIntField(b, `,"messageTokens":`, u.MessageTokens)
	b = appendIntField(b, `,"sessionTokens":`, u.SessionTokens)
	if len(u.Calls) > 0 {
		b = append(b, `,"calls":{`...)
		// encoding/json writes a map's keys in order.
		keys := make([]string, 0, len(u.Calls))
		for k := range u.Calls {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, k)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(u.Calls[k]), 10)
		}
		b = append(b, '}')
	}
	b = appendBoolField(b, `,"granted":true`, u.Granted)
	b = appendBoolField(b, `,"budgetTripped":true`, u.BudgetTripped)
	if len(b) > n {
		b = append(b[:n], b[n+1:]...) // the first field's comma
	}
	return append(b, '}')
}

// appendIntField appends the field (name has its comma and colon) unless v
// is 0 (omitempty).
func appendIntField(b []byte, name string, v int) []byte {
	if v == 0 {
		return b
	}
	b = append(b, name...)
	return strconv.AppendInt(b, int64(v), 10)
}

// appendStringField appends the field (name has its comma and colon)
// unless v is "" (omitempty).
func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return AppendJSONString(append(b, name...), v)
}

// appendBoolField appends field (`,"name":true`) when v (omitempty).
func appendBoolField(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

// appendStrings appends a []string; nil is null, as encoding/json has it.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, s)
	}
	return append(b, ']')
}

// AppendSummary appends sum as json.Marshal writes it, and fails as it
// fails (a time MarshalJSON refuses): a store that writes summaries
// often need not reflect on them (TestAppendSummary).
func AppendSummary(b []byte, sum Summary) ([]byte, error) {
	b = AppendJSONString(append(b, `{"id":`...), sum.ID)
	b = appendStringField(b, `,"owner":`, sum.Owner)
	b = appendStringField(b, `,"title":`, sum.Title)
	b, err := appendTime(append(b, `,"created":`...), sum.Created)
	if err != nil {
		return nil, err
	}
	if b, err = appendTime(append(b, `,"updated":`...), sum.Updated); err != nil {
		return nil, err
	}
	b = appendBoolField(b, `,"ended":true`, sum.Ended)
	b = appendBoolField(b, `,"busy":true`, sum.Busy)
	return append(b, '}'), nil
}

// appendTime appends t as time.Time's MarshalJSON writes it, and fails as
// it fails (a year outside [0,9999], a zone beyond ±23 hours).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	n := len(b)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	z := b[len(b)-1]
	if b[n+1+len("9999")] != '-' || z != 'Z' && (isDigit(b[len(b)-len("Z07:00")]) || (b[len(b)-5]-'0')*10+b[len(b)-4]-'0' >= 24) {
		_, err := t.MarshalJSON()
		return b[:n], err
	}
	return append(b, '"'), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// appendFloat appends f as encoding/json writes a float64: without an
// exponent when that is how it writes f, else through json.Marshal.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if abs := math.Abs(f); abs == 0 || abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	return appendMarshal(b, f)
}

// appendRaw appends a JSON value as Marshal writes a RawMessage: compact,
// with U+2028/U+2029 escaped, refused when it is not JSON. A valid value
// without space between its tokens and without those characters is
// written as it is.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case c == 0xE2: // the first byte of U+2028 and U+2029 (and others)
			return appendMarshal(b, raw)
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return appendMarshal(b, raw)
		}
	}
	if !json.Valid(raw) {
		return appendMarshal(b, raw)
	}
	return append(b, raw...), nil
}

// appendMarshal appends Marshal's encoding of v.
func appendMarshal(b []byte, v any) ([]byte, error) {
	j, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
