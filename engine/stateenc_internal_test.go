package engine

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// The journal's state is written by hand (stateenc.go); what a restarted
// gateway reads must be what encoding/json would have written, byte for
// byte, for every state.

func TestAppendStateIsMarshal(t *testing.T) {
	at := time.Date(2026, 12, 3, 14, 10, 26, 123456789, time.UTC)
	zone := time.FixedZone("x", -(9*3600 + 30*60))
	spec := specState{Attempts: 3, Timeout: 30 * time.Second, Backoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}
	odd := specState{Attempts: 1, Multiplier: 1e-9, MaxTimeout: time.Hour}
	big := specState{Multiplier: 1.5e300}
	tests := map[string]sessionState{
		"new":        {V: stateVersion, Created: at, Updated: at},
		"zero times": {V: stateVersion},
		"agent": {V: stateVersion, Owner: "alice", Created: at, Updated: at.In(zone), Title: "A <b>title</b> & more",
			Agent: &AgentConfig{Model: "m", System: "be \"nice\"\n", Tools: []AgentTool{{Name: "echo", Input: json.RawMessage(`{ "type": "object" }`), Handler: HandlerClient}}}},
		"calls": {V: stateVersion, Created: at, Updated: at, NextCall: 7, Batches: 3, Turn: true, Calls: []callState{
			{ID: "call_1", Name: "echo", Handler: HandlerWorker, Args: `{"text":"héllo \u2028 <x>"}`, Spec: &spec,
				Input: &ToolInput{Status: "valid", Value: json.RawMessage(`{"text":"echo 1000","q":"a\\\" b"}`)}, Batch: 3, Seq: 12, Attempt: 1,
				Deadline: at.Add(time.Minute), AttemptStarted: at, Reached: true},
			{ID: "call_2", Handler: HandlerClient, Settled: true, AnsweredBy: 2, Args: "not json \x01\x7f\xff", Spec: &odd,
				SpecErr: "bad retry", Input: &ToolInput{Status: "invalid", Value: json.RawMessage("[1, 2,\n3]"), Error: "no"},
				Proposed: &ToolError{ID: "call_2", Attempt: 2, Error: "bad input", Retryable: true, Code: ErrorCode("invalid_input"), Detail: json.RawMessage(`{"a":"<&>"}`)},
				Batch:    3, Cancelled: true, BackingOff: true, RetryAt: at.Add(time.Second), NotTwice: true, Approving: true,
				Finished: &ToolFinished{ID: "call_2", OK: true, Name: "x", Result: `{"ok":1}`, Error: "e"}},
			{ID: "call_3", Handler: HandlerWorker, Spec: &big, Input: &ToolInput{}, Proposed: &ToolError{Error: ""},
				Finished: &ToolFinished{ID: "call_3"}},
			{ID: "call_4", Handler: HandlerClient, Attempt: 1, AwaitsPage: true, Finished: &ToolFinished{ID: "call_4", OK: true, Name: "empty"}},
		}},
		"queue and the rest": {V: stateVersion, Created: at, Updated: at, Prompt: true, Idle: true, Ended: true,
			Queue: []queueState{{Trigger: json.RawMessage(`{"type":"message","content":"hi"}`),
				Proposed: Decision{Actions: []Action{ModelPrompt{}}}},
				{Trigger: json.RawMessage(`{"type":"guard.tripped","guard":"model_turns"}`), Announced: true}},
			Waiting:    []string{"one", "", "three\t"},
			WaitingIDs: []string{"m1", "", "m\u00e93"},
			Declared:   [][]string{{"a", "b"}, nil, {}},
			Usage:      usage{ModelTurns: 2, MessageTokens: 10, SessionTokens: 100, Calls: map[string]int{"b\x00": 1, "a": 2}, Granted: true}},
		"empty usage map":    {V: stateVersion, Usage: usage{Calls: map[string]int{}}},
		"usage granted only": {V: stateVersion, Usage: usage{Granted: true}},
	}
	for name, st := range tests {
		t.Run(name, func(t *testing.T) {
			assertStateIsMarshal(t, &st)
		})
	}
}

func TestAppendStateFailsAsMarshal(t *testing.T) {
	for name, st := range map[string]sessionState{
		"year":       {Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"zone":       {Updated: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600))},
		"nan":        {Calls: []callState{{Spec: &specState{Multiplier: math.NaN()}}}},
		"raw":        {Calls: []callState{{Input: &ToolInput{Value: json.RawMessage(`{"a":`)}}}},
		"queued raw": {Queue: []queueState{{Trigger: json.RawMessage(`nope`)}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := json.Marshal(&st); err == nil {
				t.Fatal("json.Marshal took the state: the case tests nothing")
			}
			if got, err := appendState(nil, &st); err == nil {
				t.Fatalf("appendState took a state json.Marshal refuses: %s", got)
			}
		})
	}
}

// FuzzAppendState holds the hand-written encoder to json.Marshal for the
// values a state's strings, numbers, times and raw JSON can take.
func FuzzAppendState(f *testing.F) {
	f.Add("call_1", `{"text":"<b>"}`, []byte(`{"x": [1, "\u2028"]}`), 2.0, int64(1764771026123456789), 3600, 5)
	f.Add("\xff\u2029\x1f", "", []byte(`nope`), 1e-7, int64(-62135596800000000), -5*3600-1800, -1)
	f.Add("x", "y", []byte(`{"a":"b c\\\" d","e":[ 1]}`), 1.0, int64(0), 60, 1)
	f.Add("", "\"\\\b\f\n\r\t", []byte(`null`), math.Copysign(0, -1), int64(253402300800000000), 0, 0)
	f.Fuzz(func(t *testing.T, s, args string, raw []byte, mult float64, nanos int64, offset, n int) {
		when := time.Unix(0, nanos).In(time.FixedZone("z", offset))
		st := sessionState{V: n, Owner: s, Created: when, Updated: when.UTC(), Title: args, NextCall: n,
			Calls: []callState{{ID: s, Name: args, Handler: Handler(s), AnsweredBy: n, Args: args,
				Spec:  &specState{Attempts: n, Timeout: time.Duration(nanos), Multiplier: mult, MaxTimeout: time.Duration(n)},
				Input: &ToolInput{Status: s, Value: raw, Error: args}, Proposed: &ToolError{ID: s, Attempt: n, Error: args, Code: ErrorCode(s), Detail: raw},
				Deadline: when, Finished: &ToolFinished{ID: s, OK: n > 0, Name: args, Result: args, Error: s}, FinishedSeq: int64(n)}},
			Queue:      []queueState{{Trigger: raw}},
			Waiting:    []string{s, args},
			WaitingIDs: []string{args, s},
			Declared:   [][]string{{s, args}},
			Usage:      usage{ModelTurns: n, Calls: map[string]int{s: n, args: 1}},
		}
		assertStateIsMarshal(t, &st)
	})
}

func assertStateIsMarshal(t *testing.T, st *sessionState) {
	t.Helper()
	want, wantErr := marshalNoHTML(st)
	got, err := appendState([]byte("prefix"), st)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("appendState: %v, json.Marshal: %v", err, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("appendState wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}
