package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/clienttools/gateway/engine/model"
)

// Model is a compiled script. It holds no per-session state, so one Model
// serves every session at once.
type Model struct {
	rules                 []rule
	after                 []after
	fallback              template
	defaultOK, defaultErr template
	chunkWords            int
	delay                 time.Duration
}

var _ model.Model = (*Model)(nil)

type rule struct {
	re         *regexp.Regexp
	say        template
	tools      []toolTemplate
	chunkWords int
	delay      time.Duration
}

type toolTemplate struct {
	name string
	args template
}

type after struct {
	tool    string
	re      *regexp.Regexp // nil matches any text
	ok, err template       // nil: this entry does not word that outcome
	tools   []toolTemplate // called again after the sentence
}

// turn is what the script decided to say and call, before streaming.
type turn struct {
	text       string
	tools      []model.ToolUse
	chunkWords int
	delay      time.Duration
}

// Generate answers the transcript's last message: a user message by the
// first matching rule (or the fallback), trailing tool messages by wording
// each result. Text streams through onDelta in chunks of words when
// req.Stream is set, else in one delta after the same total delay. A reply
// longer than req.MaxTokens words is cut there and makes no tool uses. A
// cancelled ctx returns what was streamed, StopCancelled and ctx.Err().
func (m *Model) Generate(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	t := m.reply(req.Messages)
	resp := model.Response{Usage: model.Usage{InputTokens: inputTokens(req)}}

	text := t.text
	if req.MaxTokens > 0 && countWords(text) > req.MaxTokens {
		text = firstWords(text, req.MaxTokens)
		t.tools = nil
		resp.StopReason = model.StopMaxTokens
	}
	parts := chunks(text, t.chunkWords)
	wait := t.delay
	if !req.Stream && len(parts) > 1 {
		wait *= time.Duration(len(parts))
		parts = []string{text}
	}

	var streamed strings.Builder
	for _, p := range parts {
		if err := sleep(ctx, wait); err != nil {
			return cancelled(resp, streamed.String()), err
		}
		streamed.WriteString(p)
		if onDelta != nil {
			onDelta(p)
		}
	}
	// A cancel that lands during the last delta still stops the tool uses,
	// which come after the text as they would from a real provider.
	if err := ctx.Err(); err != nil {
		return cancelled(resp, streamed.String()), err
	}

	resp.Text = text
	resp.ToolUses = withIDs(t.tools, req.Messages)
	resp.Usage.OutputTokens = countWords(text)
	for _, u := range resp.ToolUses {
		resp.Usage.OutputTokens += countWords(u.Name) + countWords(u.Arguments)
	}
	switch {
	case resp.StopReason != "":
	case len(resp.ToolUses) > 0:
		resp.StopReason = model.StopToolUse
	default:
		resp.StopReason = model.StopEndTurn
	}
	return resp, nil
}

func cancelled(resp model.Response, text string) model.Response {
	resp.Text = text
	resp.ToolUses = nil
	resp.StopReason = model.StopCancelled
	resp.Usage.OutputTokens = countWords(text)
	return resp
}

// sleep waits d, or until ctx ends. With d zero it only reports a cancel, so
// a delay-free script still stops between chunks.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// reply decides the turn from the last message alone, which is what makes
// the model stateless.
func (m *Model) reply(msgs []model.Message) turn {
	t := turn{chunkWords: m.chunkWords, delay: m.delay}
	if len(msgs) == 0 {
		t.text = m.fallback.render(map[string]string{"message": ""}, false)
		return t
	}
	last := msgs[len(msgs)-1]
	if last.Role == model.RoleTool {
		t.text, t.tools = m.afterTools(msgs)
		return t
	}
	var msg string
	if last.Role == model.RoleUser {
		msg = strings.TrimSpace(last.Content)
		for _, r := range m.rules {
			groups := r.re.FindStringSubmatch(msg)
			if groups == nil {
				continue
			}
			vars := make(map[string]string, 2*len(groups))
			for i, name := range r.re.SubexpNames() {
				vars[strconv.Itoa(i)] = groups[i]
				if name != "" {
					vars[name] = groups[i]
				}
			}
			t.text = r.say.render(vars, false)
			for _, tt := range r.tools {
				t.tools = append(t.tools, model.ToolUse{Name: tt.name, Arguments: tt.args.render(vars, true)})
			}
			t.chunkWords, t.delay = r.chunkWords, r.delay
			return t
		}
	}
	t.text = m.fallback.render(map[string]string{"message": msg}, false)
	return t
}

// afterTools words each trailing tool message, in the order the assistant
// asked for the calls rather than the order they settled, so parallel calls
// read the same every run.
func (m *Model) afterTools(msgs []model.Message) (string, []model.ToolUse) {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role == model.RoleTool {
		i--
	}
	results := msgs[i:]
	var uses []model.ToolUse
	if i > 0 && msgs[i-1].Role == model.RoleAssistant {
		uses = msgs[i-1].ToolUses
	}

	done := make([]bool, len(results))
	var ordered []model.Message
	names := map[string]string{}
	for _, u := range uses {
		names[u.ID] = u.Name
		for j, r := range results {
			if !done[j] && r.ToolUseID == u.ID {
				done[j] = true
				ordered = append(ordered, r)
			}
		}
	}
	for j, r := range results {
		if !done[j] {
			ordered = append(ordered, r)
		}
	}

	sentences := make([]string, 0, len(ordered))
	var again []model.ToolUse
	for _, r := range ordered {
		name := r.Name
		if name == "" {
			name = names[r.ToolUseID]
		}
		if name == "" {
			name = "the tool"
		}
		sentence, tools := m.wordResult(name, r)
		sentences = append(sentences, sentence)
		again = append(again, tools...)
	}
	return strings.Join(sentences, " "), again
}

// wordResult renders the first afterTool entry that applies to one result,
// and the tools it calls again.
func (m *Model) wordResult(name string, r model.Message) (string, []model.ToolUse) {
	content := resultText(r.Content)
	key := "result"
	if r.IsError {
		key = "error"
	}
	for _, a := range m.after {
		t := a.ok
		if r.IsError {
			t = a.err
		}
		if t == nil || (a.tool != "" && a.tool != name) {
			continue
		}
		vars := map[string]string{"tool": name, key: content}
		if a.re != nil {
			groups := a.re.FindStringSubmatch(content)
			if groups == nil {
				continue
			}
			for i, g := range a.re.SubexpNames() {
				vars[strconv.Itoa(i)] = groups[i]
				if g != "" {
					vars[g] = groups[i]
				}
			}
		}
		var again []model.ToolUse
		for _, tt := range a.tools {
			again = append(again, model.ToolUse{Name: tt.name, Arguments: tt.args.render(vars, true)})
		}
		return t.render(vars, false), again
	}
	switch {
	case content == "" && r.IsError:
		return name + " failed.", nil
	case content == "":
		return name + " returned nothing.", nil
	case r.IsError:
		return m.defaultErr.render(map[string]string{"tool": name, "error": content}, false), nil
	}
	return m.defaultOK.render(map[string]string{"tool": name, "result": content}, false), nil
}

// resultText is the text a result is matched and shown as: a JSON string
// unquoted, JSON objects and arrays compacted (so a match need not care how
// the browser spaced its JSON), anything else as written.
func resultText(content string) string {
	s := strings.TrimSpace(content)
	if s == "" || !json.Valid([]byte(s)) {
		return s
	}
	switch s[0] {
	case '"':
		var str string
		if json.Unmarshal([]byte(s), &str) == nil {
			return str
		}
	case '{', '[':
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) == nil {
			return buf.String()
		}
	}
	return s
}

// withIDs numbers the new tool uses after every tool use already in the
// transcript ("call_1", "call_2", ...), skipping ids taken by another
// provider, so ids are unique within a session and the same on every run.
func withIDs(uses []model.ToolUse, msgs []model.Message) []model.ToolUse {
	if len(uses) == 0 {
		return nil
	}
	taken := map[string]bool{}
	n := 0
	for _, m := range msgs {
		for _, u := range m.ToolUses {
			taken[u.ID] = true
			n++
		}
		if m.ToolUseID != "" {
			taken[m.ToolUseID] = true
		}
	}
	out := make([]model.ToolUse, len(uses))
	for i, u := range uses {
		for {
			n++
			id := "call_" + strconv.Itoa(n)
			if !taken[id] {
				u.ID = id
				taken[id] = true
				break
			}
		}
		out[i] = u
	}
	return out
}

// inputTokens counts the request's words, the scripted stand-in for tokens.
func inputTokens(req model.Request) int {
	n := countWords(req.System)
	for _, m := range req.Messages {
		n += countWords(m.Content)
		for _, u := range m.ToolUses {
			n += countWords(u.Name) + countWords(u.Arguments)
		}
	}
	return n
}

func countWords(s string) int { return len(strings.Fields(s)) }

// chunks splits text into pieces of n words each, every piece keeping the
// space after its words, so the pieces concatenate to exactly text.
func chunks(text string, n int) []string {
	if text == "" {
		return nil
	}
	var parts []string
	start, words := 0, 0
	inWord := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if words == n {
				parts = append(parts, text[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	return append(parts, text[start:])
}

// firstWords returns text up to the end of its n-th word.
func firstWords(text string, n int) string {
	words := 0
	inWord := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if space && inWord && words == n {
			return text[:i]
		}
		if !space && !inWord {
			words++
		}
		inWord = !space
	}
	return text
}
