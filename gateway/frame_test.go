package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/gateway"
)

// encodeFrame writes a decoded browser frame back as the JSON a browser
// would send.
func encodeFrame(t *testing.T, f gateway.Frame) []byte {
	t.Helper()
	withType := func(typ string, v any) []byte {
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode %#v: %v", v, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		m["type"], _ = json.Marshal(typ)
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	switch f := f.(type) {
	case gateway.SessionOpen:
		return withType(gateway.FrameSessionOpen, f)
	case gateway.MessageFrame:
		return withType(gateway.FrameMessage, f)
	case gateway.CancelFrame:
		return withType(gateway.FrameCancel, f)
	case gateway.PingFrame:
		return withType(gateway.FramePing, f)
	case engine.ToolResult, engine.ToolError:
		// Their MarshalJSON writes "type" itself.
		out, err := json.Marshal(f)
		if err != nil {
			t.Fatalf("encode %#v: %v", f, err)
		}
		return out
	default:
		t.Fatalf("DecodeFrame returned a %T", f)
		return nil
	}
}

var frameSeeds = []string{
	// Valid frames.
	`{"type":"session.open"}`,
	`{"type":"session.open","session":"abc","after":12,"tools":["get_local_time","set_theme"]}`,
	`{"type":"message","content":"what time is it"}`,
	`{"type":"message","content":"\u00e9t\u00e9 <b>&</b>"}`,
	`{"type":"tool.result","id":"call_1","attempt":1,"result":{"time":"12:00","timeZone":"UTC"}}`,
	`{"type":"tool.result","id":"call_1","attempt":2,"result":"a string"}`,
	`{"type":"tool.result","id":"call_1","attempt":1,"result":null}`,
	`{"type":"tool.result","id":"call_1","attempt":1,"result":[1, 2.50, {"a" : true}]}`,
	`{"type":"tool.error","id":"call_1","attempt":1,"error":"denied","retryable":true,"code":"tool_failed","detail":{"why":"user"}}`,
	`{"type":"cancel"}`,
	`  {"type":"cancel","extra":1}  `,
	`{"type":"ping"}`,
	// Broken frames.
	``,
	`{`,
	`null`,
	`[]`,
	`"session.open"`,
	`{"type":null}`,
	`{"type":7}`,
	`{"TYPE":"cancel"}`,
	`{"type":"nope"}`,
	`{"type":"message"}`,
	`{"type":"message","content":""}`,
	`{"type":"message","content":5}`,
	`{"type":"message","content":"hi","Content":"ho"}`,
	`{"type":"session.open","after":-1}`,
	`{"type":"session.open","after":1.5}`,
	`{"type":"session.open","tools":[""]}`,
	`{"type":"session.open","tools":"get_local_time"}`,
	`{"type":"tool.result","id":"","attempt":1,"result":1}`,
	`{"type":"tool.result","id":"call_1","attempt":0,"result":1}`,
	`{"type":"tool.result","id":"call_1","attempt":"1","result":1}`,
	`{"type":"tool.result","id":"call_1","attempt":1}`,
	`{"type":"tool.result","id":"call_1","attempt":1,"result":1,"ID":"call_2"}`,
	`{"type":"tool.error","id":"call_1","attempt":1}`,
	`{"type":"tool.error","id":"call_1","attempt":1,"error":""}`,
	`{"type":"tool.error","id":"call_1","attempt":1,"error":"x","retryable":"yes"}`,
	`{"type":"message","content":"a"} {"type":"cancel"}`,
	"{\"type\":\"message\",\"content\":\"\xff\xfe\"}",
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := gateway.DecodeFrame(data)
		if err != nil {
			if frame != nil {
				t.Errorf("DecodeFrame(%q) returned a frame and an error: %v", data, err)
			}
			if !errors.Is(err, gateway.ErrBadFrame) && !errors.Is(err, gateway.ErrUnknownFrame) {
				t.Errorf("DecodeFrame(%q): %v is neither ErrBadFrame nor ErrUnknownFrame", data, err)
			}
			return
		}
		// A frame that decodes re-encodes to a frame that decodes to the
		// same thing, and encoding that again changes nothing.
		enc := encodeFrame(t, frame)
		again, err := gateway.DecodeFrame(enc)
		if err != nil {
			t.Fatalf("DecodeFrame(%q) = %#v, whose encoding %s does not decode: %v", data, frame, enc, err)
		}
		if reflect.TypeOf(again) != reflect.TypeOf(frame) {
			t.Fatalf("%s decoded as %T, then re-encoded as %s, decoded as %T", data, frame, enc, again)
		}
		if enc2 := encodeFrame(t, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s encodes as %s, then as %s", data, enc, enc2)
		}
	})
}

func TestDecodeFrame(t *testing.T) {
	tests := []struct {
		data    string
		want    gateway.Frame
		wantErr error
		mention string
	}{
		{data: `{"type":"cancel"}`, want: gateway.CancelFrame{}},
		{data: `{"type":"ping"}`, want: gateway.PingFrame{}},
		{data: `{"type":"session.open","session":"s1","after":3,"tools":["a"]}`, want: gateway.SessionOpen{Session: "s1", After: 3, Tools: []string{"a"}}},
		{data: `{"type":"message","content":"hi"}`, want: gateway.MessageFrame{Content: "hi"}},
		{data: `{"type":"tool.result","id":"c","attempt":1,"result":{"a":1}}`, want: engine.ToolResult{ID: "c", Attempt: 1, Result: json.RawMessage(`{"a":1}`)}},
		{data: `{"type":"tool.error","id":"c","attempt":2,"error":"no","retryable":true}`, want: engine.ToolError{ID: "c", Attempt: 2, Error: "no", Retryable: true}},
		{data: `{"type":"tool.progress","id":"c","attempt":1,"progress":3,"total":10,"message":"uploading"}`, want: engine.ToolProgress{ID: "c", Attempt: 1, Progress: ptr(3.0), Total: ptr(10.0), Message: "uploading"}},
		{data: `{"type":"tool.progress","id":"c","attempt":1}`, want: engine.ToolProgress{ID: "c", Attempt: 1}},
		{data: `{"type":"tool.progress","id":"c"}`, wantErr: gateway.ErrBadFrame, mention: `missing "attempt"`},
		{data: `{"type":"tool.progress","id":"c","attempt":1,"progress":"half"}`, wantErr: gateway.ErrBadFrame, mention: `"progress"`},
		{data: `{"type":"tool.approve","id":"c","digest":"ab12","approved":false}`, want: engine.ToolApprove{ID: "c", Digest: "ab12", Approved: false}},
		{data: `{"type":"tool.approve","id":"c","digest":"ab12"}`, wantErr: gateway.ErrBadFrame, mention: `missing "approved"`},
		{data: `{"type":"tool.approve","id":"c","digest":"ab12","approved":null}`, wantErr: gateway.ErrBadFrame, mention: `"approved" should be true or false, not null`},
		{data: `{"type":"tool.error","id":"c","attempt":1,"error":""}`, want: engine.ToolError{ID: "c", Attempt: 1}}, // new Error() in a page: failed, saying nothing
		{data: `{"type":7}`, wantErr: gateway.ErrBadFrame, mention: `"type" should be a string, not a number`},
		{data: "{\"type\":\"message\",\"content\":\"\xff\xfe bad\"}", wantErr: gateway.ErrBadFrame, mention: `not valid UTF-8`},
		// Half a surrogate pair, escaped, as JSON.stringify writes a string
		// holding half an emoji: the character the JSON names, U+FFFD.
		{data: `{"type":"message","content":"x\ud83dy"}`, want: gateway.MessageFrame{Content: "x\ufffdy"}},
		{data: `{"type":"tool.result","id":"c","attempt":1,"result":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, wantErr: gateway.ErrBadFrame, mention: `more than 10000 deep`},
		{data: `{"type":"tool.result","id":"c","attempt":1,"result":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, want: engine.ToolResult{ID: "c", Attempt: 1, Result: json.RawMessage(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))}},
		{data: `{"TYPE":"cancel"}`, wantErr: gateway.ErrBadFrame, mention: `has "TYPE": member names are case-sensitive, write "type"`},
		{data: `{"type":"pong"}`, wantErr: gateway.ErrUnknownFrame, mention: `"pong"`},
		{data: `{"type":"tool.result","id":"c","attempt":1,"result":1,"ID":"d"}`, wantErr: gateway.ErrBadFrame, mention: `"ID"`},
		{data: `{"type":"tool.error","id":"c","attempt":0,"error":"x"}`, wantErr: gateway.ErrBadFrame, mention: `"attempt" is 0`},
		{data: `{"type":"session.open","tools":"a"}`, wantErr: gateway.ErrBadFrame, mention: `"tools" should be an array`},
		{data: `{"type":"session.open","tools":["a",5]}`, wantErr: gateway.ErrBadFrame, mention: `tools[1] should be a string, not a number`},
		{data: `{"type":"session.open","tools":["a",["b"]]}`, wantErr: gateway.ErrBadFrame, mention: `tools[1] should be a string, not an array`},
		{data: `{"type":"session.open","session":["s1"]}`, wantErr: gateway.ErrBadFrame, mention: `session.open "session" should be a string, not an array`},
		{data: `{"type":"tool.progress","id":"c","attempt":["x"]}`, wantErr: gateway.ErrBadFrame, mention: `tool.progress "attempt" should be a whole number, not an array`},
		{data: `{"type":"tool.error","id":"c","attempt":1,"error":"x","code":[1,"x"]}`, wantErr: gateway.ErrBadFrame, mention: `tool.error "code" should be a string, not an array`},
		{data: `{"type":"session.open","after":{}}`, wantErr: gateway.ErrBadFrame, mention: `"after" should be a whole number, not an object`},
		{data: `{"type":"session.open","after":3}`, wantErr: gateway.ErrBadFrame, mention: `"after" is 3 without a "session"`},
		{data: `{"type":"session.open","after":0,"tools":["a"]}`, want: gateway.SessionOpen{Tools: []string{"a"}}},
		{data: `{"type":"session.open","session":"s1","after":3,"epoch":"e1"}`, want: gateway.SessionOpen{Session: "s1", After: 3, Epoch: "e1"}},
		{data: `{"type":"session.open","epoch":"e1"}`, wantErr: gateway.ErrBadFrame, mention: `"epoch" is session.opened's, 128 bytes at most, with the "session" it came with`},
		{data: `{"type":"session.open","session":"s1","epoch":"` + strings.Repeat("e", 129) + `"}`, wantErr: gateway.ErrBadFrame, mention: `"epoch" is session.opened's, 128 bytes at most`},
		{data: `{"type":"session.open","session":"s1","epoch":5}`, wantErr: gateway.ErrBadFrame, mention: `"epoch" should be a string, not a number`},
		{data: `{"type":"tool.progress","id":"c","attempt":1,"progress":1e400}`, wantErr: gateway.ErrBadFrame, mention: `"progress" should be a finite number a float64 holds, not 1e400`},
		{data: `{"type":"tool.progress","id":"c","attempt":99999999999999999999}`, wantErr: gateway.ErrBadFrame, mention: `"attempt" should be a whole number that fits in 64 bits`},
		{data: `{"type":"tool.error","id":"c","attempt":1,"error":"x","code":"tool_failed"}`, want: engine.ToolError{ID: "c", Attempt: 1, Error: "x", Code: engine.CodeToolFailed}},
		{data: `{"type":"tool.error","id":"c","attempt":1,"error":"x","code":"subagent_failed"}`, want: engine.ToolError{ID: "c", Attempt: 1, Error: "x", Code: engine.CodeSubagentFailed}},
		{data: `{"type":"tool.error","id":"c","attempt":1,"error":"x","code":"Tool_Failed"}`, wantErr: gateway.ErrBadFrame, mention: `"code" "Tool_Failed" is not a tool error code`},
	}
	for _, tc := range tests {
		t.Run(tc.data, func(t *testing.T) {
			got, err := gateway.DecodeFrame([]byte(tc.data))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.mention) || got != nil {
					t.Errorf("DecodeFrame = %#v, %v; want %v naming %s", got, err, tc.wantErr, tc.mention)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecodeFrame = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

func ExampleDecodeFrame() {
	f, err := gateway.DecodeFrame([]byte(`{"type":"tool.result","id":"call_1","attempt":1,"result":{"approved":true}}`))
	if err != nil {
		panic(err)
	}
	answer := f.(engine.ToolResult)
	fmt.Println(answer.ID, answer.Attempt, string(answer.Result))

	_, err = gateway.DecodeFrame([]byte(`{"type":"tool.result","id":"call_1","result":{}}`))
	fmt.Println(err)
	// Output:
	// call_1 1 {"approved":true}
	// bad frame: tool.result frame is missing "attempt"
}

func ptr[T any](v T) *T { return &v }

// Member names are case-sensitive in every frame (docs/protocol.md):
// encoding/json would take "Approved" for "approved", so a frame could
// carry two answers and the gateway act on the one a page did not mean.
func TestDecodeFrameMemberCase(t *testing.T) {
	valid := map[string]string{
		"session.open":  `{"type":"session.open","session":"s1","after":1,"tools":["a"]}`,
		"message":       `{"type":"message","content":"hi"}`,
		"tool.result":   `{"type":"tool.result","id":"c","attempt":1,"result":1}`,
		"tool.error":    `{"type":"tool.error","id":"c","attempt":1,"error":"x","retryable":false,"code":"tool_failed","detail":{}}`,
		"tool.progress": `{"type":"tool.progress","id":"c","attempt":1,"progress":1,"total":2,"message":"m"}`,
		"tool.approve":  `{"type":"tool.approve","id":"c","digest":"d","approved":true}`,
	}
	for typ, frame := range valid {
		if _, err := gateway.DecodeFrame([]byte(frame)); err != nil {
			t.Fatalf("%s: %v", frame, err)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(frame), &members); err != nil {
			t.Fatal(err)
		}
		for name, value := range members {
			other := strings.ToUpper(name[:1]) + name[1:]
			t.Run(typ+"/"+other, func(t *testing.T) {
				data := strings.TrimSuffix(frame, "}") + fmt.Sprintf(`,%q:%s}`, other, value)
				got, err := gateway.DecodeFrame([]byte(data))
				if !errors.Is(err, gateway.ErrBadFrame) || !strings.Contains(err.Error(), "case-sensitive") || got != nil {
					t.Errorf("DecodeFrame(%s) = %#v, %v; want a bad frame naming %q", data, got, err, other)
				}
			})
		}
	}
}

// TestDecodeFrameNearMisses: a member a frame does not define is ignored
// (later versions may add members), but not a misspelling of one it does:
// "sessionId" opened a new session where its sender meant to resume one,
// and "retriable" left an error not retryable, in silence (an outside
// audit).
func TestDecodeFrameNearMisses(t *testing.T) {
	for _, tc := range []struct {
		frame, sent, meant string // the member sent and the one the refusal names; "" when the frame is taken
	}{
		{`{"type":"session.open","sessionId":"s1"}`, "sessionId", "session"},
		{`{"type":"session.open","session_id":"s1"}`, "session_id", "session"},
		{`{"type":"tool.error","id":"c","attempt":1,"error":"x","retriable":true}`, "retriable", "retryable"},
		{`{"type":"tool.progress","id":"c","attempt":1,"progres":1}`, "progres", "progress"},
		// In place of a member the frame needs: the refusal names what was
		// sent, not only what is missing.
		{`{"type":"tool.result","id":"c","atempt":1,"result":1}`, "atempt", "attempt"},
		{`{"type":"tool.result","id":"c","attempts":1,"result":1}`, "attempts", "attempt"},
		{`{"type":"tool.result","id":"c","Attempt":1,"result":1}`, "Attempt", "attempt"},
		{`{"type":"message","contents":"hi"}`, "contents", "content"},
		{`{"type":"message","Content":"hi"}`, "Content", "content"},
		{`{"Type":"ping"}`, "Type", "type"},
		{`{"TYPE":"message","content":"hi"}`, "TYPE", "type"},
		{`{"type":"tool.error","id":"c","attempt":1,"eror":"x"}`, "eror", "error"},
		{`{"type":"session.open","tools":["a"],"theme":"dark"}`, "", ""},
		{`{"type":"message","content":"hi","id":"m1","sentAt":"12:00"}`, "", ""},
		{`{"type":"tool.result","id":"c","attempt":1,"result":1,"ids":[1]}`, "", ""}, // "id" is too short to guess at
		// Beside the name it is near, another member: ignored.
		{`{"type":"message","content":"hi","context":"x"}`, "", ""},
		{`{"type":"tool.result","id":"c","attempt":1,"attempts":3,"result":1,"results":[1]}`, "", ""},
		{`{"type":"tool.error","id":"c","attempt":1,"error":"x","errorCode":"E42"}`, "", ""},
		{`{"type":"session.open","session":"s1","sessionId":"s1","tools":["a"],"toolset":"x"}`, "", ""},
	} {
		got, err := gateway.DecodeFrame([]byte(tc.frame))
		switch {
		case tc.meant == "" && err != nil:
			t.Errorf("DecodeFrame(%s): %v, want it taken: a member the frame does not define is ignored", tc.frame, err)
		case tc.meant != "" && (!errors.Is(err, gateway.ErrBadFrame) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.meant)) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", tc.sent)) || got != nil):
			t.Errorf("DecodeFrame(%s) = %#v, %v; want a bad frame naming %q and %q", tc.frame, got, err, tc.sent, tc.meant)
		}
	}
}
