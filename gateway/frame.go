package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clienttools/gateway/clip"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/jsonfields"
)

// Frame types the browser sends.
const (
	FrameSessionOpen  = "session.open"
	FrameMessage      = "message"
	FrameToolResult   = engine.TypeToolResult
	FrameToolError    = engine.TypeToolError
	FrameToolProgress = engine.TypeToolProgress
	FrameToolApprove  = engine.TypeToolApprove
	FrameCancel       = "cancel"
	FramePing         = "ping"
)

// FramePong answers a ping, to the page that sent it (no seq).
const FramePong = "pong"

// FrameError is the frame the gateway sends for a frame it could not take,
// outside the session's event log: an engine.ErrorEvent without seq.
const FrameError = engine.EventError

// ErrorFrame is the error frame's fields.
//
// Deprecated: use engine.ErrorEvent, which it is.
type ErrorFrame = engine.ErrorEvent

// frameType is f's type, as a metric label: "invalid" for a frame that
// did not decode.
func frameType(f Frame) string {
	switch f.(type) {
	case SessionOpen:
		return FrameSessionOpen
	case MessageFrame:
		return FrameMessage
	case engine.ToolResult:
		return FrameToolResult
	case engine.ToolError:
		return FrameToolError
	case CancelFrame:
		return FrameCancel
	case PingFrame:
		return FramePing
	case engine.ToolProgress:
		return FrameToolProgress
	case engine.ToolApprove:
		return FrameToolApprove
	}
	return "invalid"
}

// Frame is one decoded browser frame: one of SessionOpen, MessageFrame,
// engine.ToolResult, engine.ToolError, engine.ToolProgress,
// engine.ToolApprove, CancelFrame, PingFrame.
type Frame interface{}

// SessionOpen is the first frame of a connection.
type SessionOpen struct {
	Session string `json:"session,omitempty"`
	After   int64  `json:"after,omitempty"`
	// Epoch is the epoch of the session.opened the page's copy came with:
	// a copy of an earlier run that saw events the store lost is refused
	// (engine.AttachOptions.Epoch).
	Epoch string   `json:"epoch,omitempty"`
	Tools []string `json:"tools,omitempty"`
}

// maxEpochBytes bounds session.open's epoch: the gateway's are 20 bytes.
const maxEpochBytes = 128

// MessageFrame is a user message. With an ID, the session takes it once
// however often it comes (engine.Page.SendOnce), and the page is told when
// it has it (message.taken).
type MessageFrame struct {
	Content string `json:"content"`
	ID      string `json:"id,omitempty"`
}

// CancelFrame stops the current turn.
type CancelFrame struct{}

// PingFrame asks for a pong: a page that has heard nothing for a while (it
// woke from a sleep, its network came back) learns whether its socket
// still reaches its session, rather than wait until the user sends.
type PingFrame struct{}

// refusedMessageID is the id of a refused message frame (one that did not
// decode, or came before session.open), when it has one: its page is told
// that this message will not be taken, rather than send it again and
// again.
func refusedMessageID(data []byte) string {
	var f struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	if json.Unmarshal(data, &f) != nil || f.Type != FrameMessage || len(f.ID) > maxErrorText {
		return "" // far past any id a session takes: not repeated
	}
	return f.ID
}

// ErrBadFrame: a frame does not decode. Its text names what was wrong.
var ErrBadFrame = errors.New("bad frame")

// ErrUnknownFrame: a frame's type is not one the browser may send.
var ErrUnknownFrame = errors.New("unknown frame type")

// DecodeFrame reads one browser frame, checking each required field.
func DecodeFrame(data []byte) (Frame, error) {
	if !utf8.Valid(data) {
		// JSON is UTF-8: a decoder would take the frame with U+FFFD in
		// place of what the page meant.
		return nil, fmt.Errorf("%w: the frame is not valid UTF-8", ErrBadFrame)
	}
	var fields memberSet
	if err := fields.read(data); err != nil {
		return nil, err
	}
	// "Type" beside or in place of "type" is refused as any member's
	// other spelling is, before the type is known.
	if err := fields.caseCheck("the frame", []string{"type"}); err != nil {
		return nil, err
	}
	rawType, ok := fields.get("type")
	if !ok || bytes.Equal(rawType, []byte("null")) {
		return nil, fmt.Errorf("%w: missing \"type\"", ErrBadFrame)
	}
	typ, ok := knownType(rawType)
	if !ok {
		if err := json.Unmarshal(rawType, &typ); err != nil {
			return nil, fmt.Errorf("%w: \"type\" should be a string, not %s", ErrBadFrame, kindOf(rawType))
		}
	}
	need := func(names ...string) error {
		for _, n := range names {
			if _, ok := fields.get(n); !ok {
				// A member sent in its place ("Content", "attempts") is
				// named: the sender wrote it, and reads for it.
				if err := fields.caseCheck(typ, []string{n}); err != nil {
					return err
				}
				return fmt.Errorf("%w: %s frame is missing %q", ErrBadFrame, typ, n)
			}
		}
		return nil
	}
	switch typ {
	case FrameSessionOpen:
		var f SessionOpen
		if err := decodeStrict(typ, &fields, data, &f); err != nil {
			return nil, err
		}
		if f.After < 0 {
			return nil, fmt.Errorf("%w: session.open \"after\" is %d, want 0 or more", ErrBadFrame, f.After)
		}
		if f.After > 0 && f.Session == "" {
			// Checked before a session is made for it.
			return nil, fmt.Errorf("%w: session.open \"after\" is %d without a \"session\": after resumes a session; a new one starts at 0", ErrBadFrame, f.After)
		}
		if len(f.Epoch) > maxEpochBytes || (f.Epoch != "" && f.Session == "") {
			return nil, fmt.Errorf("%w: session.open \"epoch\" is session.opened's, %d bytes at most, with the \"session\" it came with", ErrBadFrame, maxEpochBytes)
		}
		for i, t := range f.Tools {
			if t == "" {
				return nil, fmt.Errorf("%w: session.open tools[%d] is empty", ErrBadFrame, i)
			}
		}
		return f, nil
	case FrameMessage:
		if err := need("content"); err != nil {
			return nil, err
		}
		var f MessageFrame
		rawID, hasID := fields.get("id")
		if err := decodePlain(typ, &fields, data, &f, func() bool {
			var ok bool
			f.Content, ok = plainString(fields.value("content"))
			if ok && hasID {
				f.ID, ok = plainString(rawID)
			}
			return ok
		}); err != nil {
			return nil, err
		}
		if !hasID && len(bytes.TrimSpace([]byte(f.Content))) == 0 {
			// With an id, the session answers: a copy of a message it
			// took is confirmed whatever its content (engine.CheckMessage).
			return nil, fmt.Errorf("%w: message \"content\" is empty", ErrBadFrame)
		}
		if hasID {
			if err := engine.CheckMessageID(f.ID); err != nil {
				return nil, fmt.Errorf("%w: %s", ErrBadFrame, badRequestWhat(err))
			}
		}
		return f, nil
	case FrameToolResult:
		if err := need("id", "attempt", "result"); err != nil {
			return nil, err
		}
		var f engine.ToolResult
		if err := decodePlain(typ, &fields, data, &f, func() bool {
			var idOK, attemptOK bool
			f.ID, idOK = plainString(fields.value("id"))
			f.Attempt, attemptOK = plainInt(fields.value("attempt"))
			f.Result = bytes.Clone(fields.value("result")) // data is the reader's buffer
			return idOK && attemptOK
		}); err != nil {
			return nil, err
		}
		if err := checkAnswer(typ, f.ID, f.Attempt); err != nil {
			return nil, err
		}
		return f, nil
	case FrameToolError:
		if err := need("id", "attempt", "error"); err != nil {
			return nil, err
		}
		var f engine.ToolError
		if err := decodeStrict(typ, &fields, data, &f); err != nil {
			return nil, err
		}
		// An empty "error" is the tool's failure all the same (what
		// JavaScript's new Error() gives): the engine says it failed
		// without saying why, as for a worker's.
		if f.Code != "" && !f.Code.Known() {
			return nil, fmt.Errorf("%w: tool.error \"code\" %s is not a tool error code: leave it out, or use one docs/protocol.md lists (tool_failed when the tool failed)", ErrBadFrame, clip.Quote(string(f.Code), maxQuoted))
		}
		if err := checkAnswer(typ, f.ID, f.Attempt); err != nil {
			return nil, err
		}
		return f, nil
	case FrameToolProgress:
		if err := need("id", "attempt"); err != nil {
			return nil, err
		}
		var f engine.ToolProgress
		if err := decodeStrict(typ, &fields, data, &f); err != nil {
			return nil, err
		}
		if err := checkAnswer(typ, f.ID, f.Attempt); err != nil {
			return nil, err
		}
		return f, nil
	case FrameToolApprove:
		if err := need("id", "digest", "approved"); err != nil {
			return nil, err
		}
		var f engine.ToolApprove
		if err := decodeStrict(typ, &fields, data, &f); err != nil {
			return nil, err
		}
		if raw, _ := fields.get("approved"); bytes.Equal(raw, []byte("null")) {
			// Decoded as false: a denial nobody gave.
			return nil, fmt.Errorf("%w: tool.approve \"approved\" should be true or false, not null", ErrBadFrame)
		}
		if f.ID == "" || f.Digest == "" {
			return nil, fmt.Errorf("%w: tool.approve \"id\" and \"digest\" must not be empty", ErrBadFrame)
		}
		return f, nil
	case FrameCancel:
		return CancelFrame{}, nil
	case FramePing:
		return PingFrame{}, nil
	default:
		return nil, fmt.Errorf("%w %s: want session.open, message, tool.result, tool.error, tool.progress, tool.approve, cancel or ping", ErrUnknownFrame, clip.Quote(typ, maxQuoted))
	}
}

func checkAnswer(typ, id string, attempt int) error {
	if id == "" {
		return fmt.Errorf("%w: %s \"id\" is empty", ErrBadFrame, typ)
	}
	if attempt < 1 {
		return fmt.Errorf("%w: %s \"attempt\" is %d, want 1 or more", ErrBadFrame, typ, attempt)
	}
	return nil
}

// members lists a JSON object's members by their exact names: the
// general path of memberSet.read, which has checked that data is JSON.
func members(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: not a JSON object: send one JSON object per text frame", ErrBadFrame)
	}
	return m, nil
}

// frameFields are the member names of each frame type that decodes into a
// struct, besides "type": its fields' JSON names, so a field added to one
// is checked too.
var frameFields = map[string][]string{
	FrameSessionOpen:  jsonfields.Names(reflect.TypeFor[SessionOpen]()),
	FrameMessage:      jsonfields.Names(reflect.TypeFor[MessageFrame]()),
	FrameToolResult:   jsonfields.Names(reflect.TypeFor[engine.ToolResult]()),
	FrameToolError:    jsonfields.Names(reflect.TypeFor[engine.ToolError]()),
	FrameToolProgress: jsonfields.Names(reflect.TypeFor[engine.ToolProgress]()),
	FrameToolApprove:  jsonfields.Names(reflect.TypeFor[engine.ToolApprove]()),
}

// decodeStrict decodes into v and names the field whose type is wrong.
// Member names must match exactly: encoding/json would also take "ID" for
// "id", so two spellings of one field could disagree.
func decodeStrict(typ string, fields *memberSet, data []byte, v any) error {
	if err := fields.caseCheck(typ, frameFields[typ]); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%w: %s %s", ErrBadFrame, typ, mistyped(te, fields.value(te.Field), isSliceField(v, te.Field)))
		}
		return fmt.Errorf("%w: %s: %v", ErrBadFrame, typ, err)
	}
	return nil
}

// decodePlain is decodeStrict for the frames a page sends most: plain
// reads their members from the bytes already scanned, as encoding/json
// would decode them, and reports false for any value it does not read
// (an escape, a number that is not a plain integer, a wrong type), which
// decodeStrict then decodes into v, as it does every other frame.
// FuzzDecodePlain holds the two to the same answers.
func decodePlain(typ string, fields *memberSet, data []byte, v any, plain func() bool) error {
	if fields.slow == nil {
		if err := fields.caseCheck(typ, frameFields[typ]); err != nil {
			return err
		}
		if plain() {
			return nil
		}
	}
	return decodeStrict(typ, fields, data, v)
}

// plainString reads a JSON string with no escape whose text is UTF-8
// (encoding/json would mend bad UTF-8); false for any other value.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	text := raw[1 : len(raw)-1]
	for _, c := range text {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(text) {
		return "", false
	}
	return string(text), true
}

// plainInt reads a JSON integer of up to 18 digits, as encoding/json
// decodes it into an int; false for any other value.
func plainInt(raw []byte) (int, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if len(digits) < len(raw) {
		n = -n
	}
	return n, true
}

// kindOf names the kind of a JSON value, for error text.
func kindOf(v json.RawMessage) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// mistyped says which member, or which element of an array member (raw,
// when inArray: the member is a list), has a value of the wrong type, what
// it should be and what it is.
func mistyped(te *json.UnmarshalTypeError, raw json.RawMessage, inArray bool) string {
	field, bad := strconv.Quote(te.Field), raw
	if inArray && te.Type.Kind() != reflect.Slice {
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) == nil {
			// te.Field names the array; say which element is wrong.
			for i, e := range elems {
				if json.Unmarshal(e, reflect.New(te.Type).Interface()) != nil {
					field, bad = fmt.Sprintf("%s[%d]", te.Field, i), e
					break
				}
			}
		}
	}
	if len(bad) == 0 {
		return fmt.Sprintf("%s should be %s, not %s", field, jsonfields.Kind(te.Type), te.Value)
	}
	isNumber, fraction := kindOf(bad) == "a number", bytes.ContainsAny(bad, ".eE")
	if len(bad) > 64 {
		bad = append(bytes.Clone(bad[:64]), "..."...) // told, not repeated whole
	}
	switch kind := te.Type.Kind(); {
	case isNumber && kind >= reflect.Int && kind <= reflect.Int64 && fraction:
		return fmt.Sprintf("%s should be a whole number (digits only), not %s", field, bad)
	case isNumber && kind >= reflect.Int && kind <= reflect.Int64:
		return fmt.Sprintf("%s should be a whole number that fits in 64 bits, not %s", field, bad)
	case isNumber && kind == reflect.Float64:
		return fmt.Sprintf("%s should be a finite number a float64 holds, not %s", field, bad)
	}
	return fmt.Sprintf("%s should be %s, not %s", field, jsonfields.Kind(te.Type), kindOf(bad))
}

// isSliceField reports whether v, a pointer to a frame's struct, decodes
// the member name into a list.
func isSliceField(v any, name string) bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && f.Name == name) {
			return f.Type.Kind() == reflect.Slice
		}
	}
	return false
}

// encodeFrame writes a gateway frame with "type" first. Its values are the
// gateway's own structs, which always encode.
func encodeFrame(typ string, v any) json.RawMessage {
	b, _ := engine.EncodeFrame(typ, v)
	return b
}
