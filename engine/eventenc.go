package engine

import "strconv"

// The payloads of the events every turn publishes write themselves
// (jsonAppender): encoding/json's reflection was about 5% of the gateway's
// CPU under load. Each writes exactly the bytes json.Marshal writes for it
// (TestEventPayloadsAreMarshal, FuzzEventPayloads), and
// TestEventPayloadFields fails when one of these types gains a field its
// writer does not know. What they cannot write as Marshal does (a
// tool.finished's detail, which Marshal compacts) goes to encoding/json.

func (e MessageEvent) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"message":`...)
	b = appendMessageJSON(b, &e.Message)
	return append(b, '}'), true
}

func appendMessageJSON(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = AppendJSONString(b, m.Role)
	b = appendStringField(b, `,"content":`, m.Content)
	if len(m.ToolUses) > 0 {
		b = append(b, `,"toolUses":[`...)
		for i := range m.ToolUses {
			u := &m.ToolUses[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = AppendJSONString(b, u.ID)
			b = append(b, `,"name":`...)
			b = AppendJSONString(b, u.Name)
			b = append(b, `,"arguments":`...)
			b = AppendJSONString(b, u.Arguments)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendStringField(b, `,"toolUseId":`, m.ToolUseID)
	b = appendStringField(b, `,"name":`, m.Name)
	b = appendBoolField(b, `,"isError":true`, m.IsError)
	b = appendStringField(b, `,"id":`, m.ID)
	return append(b, '}')
}

func (e ModelDeltaEvent) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"text":`...)
	b = AppendJSONString(b, e.Text)
	return append(b, '}'), true
}

func (e ModelFinishedEvent) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, '{')
	if e.StopReason != "" {
		b = append(b, `"stopReason":`...)
		b = AppendJSONString(b, e.StopReason)
		b = append(b, ',')
	}
	b = append(b, `"usage":{"inputTokens":`...)
	b = strconv.AppendInt(b, int64(e.Usage.InputTokens), 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, int64(e.Usage.OutputTokens), 10)
	b = append(b, '}')
	b = appendStringField(b, `,"error":`, e.Error)
	return append(b, '}'), true
}

func (e ToolFinishedEvent) appendJSON(b []byte) ([]byte, bool) {
	if len(e.Detail) > 0 {
		return b, false // Marshal checks and compacts it
	}
	b = append(b, `{"id":`...)
	b = AppendJSONString(b, e.ID)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, e.OK)
	b = append(b, `,"name":`...)
	b = AppendJSONString(b, e.Name)
	if e.OK {
		// Always, when ok: an empty result is "", not a result left out.
		b = append(b, `,"result":`...)
		b = AppendJSONString(b, e.Result)
	} else {
		b = appendStringField(b, `,"result":`, e.Result)
	}
	b = appendStringField(b, `,"error":`, e.Error)
	b = appendStringField(b, `,"code":`, string(e.Code))
	return append(b, '}'), true
}
