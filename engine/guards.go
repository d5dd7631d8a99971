package engine

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Limits bound what one session's agent may spend: a model that calls tools
// for ever, or the same tool again and again, stops at them. A field left 0
// takes the engine's default (Options.Limits, itself defaulting to
// DefaultLimits); a negative one means no limit.
type Limits struct {
	// MaxModelTurns is how many model turns may answer one user message.
	MaxModelTurns int `json:"maxModelTurns,omitempty"`
	// MaxRepeats: the model asking for the same tool with the same
	// arguments this many times while answering one user message stops
	// the turn; that call does not run. A call that fails and is asked
	// for again unchanged is such a repeat.
	MaxRepeats int `json:"maxRepeats,omitempty"`
	// MaxMessageTokens is the tokens (input and output, as the provider
	// counts them) that the model turns answering one user message may
	// use. Checked before each model turn: the turn that crosses it
	// finishes, the next does not start.
	MaxMessageTokens int `json:"maxMessageTokens,omitempty"`
	// MaxSessionTokens is the same over the whole session.
	MaxSessionTokens int `json:"maxSessionTokens,omitempty"`
}

// check refuses a limit below -1: a typo, not a choice.
func (l *Limits) check() error {
	if l == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"maxModelTurns", l.MaxModelTurns}, {"maxRepeats", l.MaxRepeats}, {"maxMessageTokens", l.MaxMessageTokens}, {"maxSessionTokens", l.MaxSessionTokens}} {
		if f.v < -1 {
			return fmt.Errorf("limits.%s is %d: want a positive number, 0 for the gateway's default, or -1 for no limit", f.name, f.v)
		}
	}
	return nil
}

// DefaultLimits are the engine's limits when Options.Limits leaves a field 0.
var DefaultLimits = Limits{MaxModelTurns: 25, MaxRepeats: 3, MaxMessageTokens: 500_000, MaxSessionTokens: 5_000_000}

// or fills l's zero fields from def.
func (l Limits) or(def Limits) Limits {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return Limits{
		MaxModelTurns:    pick(l.MaxModelTurns, def.MaxModelTurns),
		MaxRepeats:       pick(l.MaxRepeats, def.MaxRepeats),
		MaxMessageTokens: pick(l.MaxMessageTokens, def.MaxMessageTokens),
		MaxSessionTokens: pick(l.MaxSessionTokens, def.MaxSessionTokens),
	}
}

// Guard names: which limit stopped a turn.
const (
	GuardModelTurns    = "model_turns"
	GuardRepeats       = "repeats"
	GuardMessageTokens = "message_tokens"
	GuardSessionTokens = "session_tokens"
)

// GuardTripped says a limit stopped the agent: the model is not prompted
// again. It is both the event pages see and the trigger the worker gets,
// whose proposed decision is to stop (nothing). A worker that decides
// otherwise answers model.prompt, which runs one more model turn past the
// guard, and may raise the limits with a new agent config.
type GuardTripped struct {
	Guard   string `json:"guard"`
	Limit   int    `json:"limit"`
	Value   int    `json:"value"`          // the figure that reached the limit
	Tool    string `json:"tool,omitempty"` // the repeated tool (repeats)
	Message string `json:"message"`        // the same, in words, for the page
}

// GuardTrippedEvent is GuardTripped as the guard.tripped event pages see.
type GuardTrippedEvent GuardTripped

// usage is what the guards count, kept in the session's state.
type usage struct {
	ModelTurns    int            `json:"modelTurns,omitempty"`    // answering the current user message
	MessageTokens int            `json:"messageTokens,omitempty"` // answering the current user message
	SessionTokens int            `json:"sessionTokens,omitempty"`
	Calls         map[string]int `json:"calls,omitempty"`   // tool and arguments -> times asked, this message
	Granted       bool           `json:"granted,omitempty"` // the worker allowed one turn past a guard
	// BudgetTripped: the session_tokens guard tripped for the budget as it
	// is, and is not tripped again for it (noteBudget clears it once the
	// budget is not spent).
	BudgetTripped bool `json:"budgetTripped,omitempty"`
}

// limits are the session's limits: its agent's over the engine's.
func (s *Session) limits() Limits {
	var l Limits
	if s.agent.Limits != nil {
		l = *s.agent.Limits
	}
	return l.or(s.e.opts.Limits)
}

// newUserMessage starts counting for a user message.
func (s *Session) newUserMessage() {
	s.usage.ModelTurns, s.usage.MessageTokens, s.usage.Calls, s.usage.Granted = 0, 0, nil, false
}

// turns is n model turns, in words: "1 turn", "2 turns".
func turns(n int) string {
	if n == 1 {
		return "1 turn"
	}
	return fmt.Sprintf("%d turns", n)
}

// turnGuard is the guard that stops the next model turn, if any.
func (s *Session) turnGuard() *GuardTripped {
	if s.usage.Granted {
		return nil
	}
	l := s.limits()
	switch {
	case l.MaxModelTurns > 0 && s.usage.ModelTurns >= l.MaxModelTurns:
		return &GuardTripped{Guard: GuardModelTurns, Limit: l.MaxModelTurns, Value: s.usage.ModelTurns,
			Message: fmt.Sprintf("Stopped: the model took %s to answer one message, %s.", turns(s.usage.ModelTurns), theLimit(s.usage.ModelTurns, l.MaxModelTurns))}
	case s.budgetSpent(l):
		return s.budgetGuard(l)
	case l.MaxMessageTokens > 0 && s.usage.MessageTokens >= l.MaxMessageTokens:
		return &GuardTripped{Guard: GuardMessageTokens, Limit: l.MaxMessageTokens, Value: s.usage.MessageTokens,
			Message: fmt.Sprintf("Stopped: answering this message used %s tokens, %s.", thousands(s.usage.MessageTokens), theBudget(s.usage.MessageTokens, l.MaxMessageTokens))}
	}
	return nil
}

// budgetGuard is the session_tokens guard for a spent budget.
func (s *Session) budgetGuard(l Limits) *GuardTripped {
	return &GuardTripped{Guard: GuardSessionTokens, Limit: l.MaxSessionTokens, Value: s.usage.SessionTokens,
		Message: fmt.Sprintf("Stopped: %s.", s.budgetSaid(l))}
}

// budgetSpent reports whether the session's model turns used its token
// budget: the session_tokens guard stops every later turn, and the
// session takes no more messages (noteBudget).
func (s *Session) budgetSpent(l Limits) bool {
	return l.MaxSessionTokens > 0 && s.usage.SessionTokens >= l.MaxSessionTokens
}

// budgetSaid says how much of the budget the session used, for the guard
// and for a message refused after it.
func (s *Session) budgetSaid(l Limits) string {
	return fmt.Sprintf("this chat has used %s tokens, %s", thousands(s.usage.SessionTokens), theBudget(s.usage.SessionTokens, l.MaxSessionTokens))
}

// countTurn counts a model turn that starts; a grant is used up by it.
func (s *Session) countTurn() {
	s.usage.ModelTurns++
	s.usage.Granted = false
}

// countTokens counts a finished model turn's tokens.
func (s *Session) countTokens(u Usage) {
	n := u.InputTokens + u.OutputTokens
	s.usage.MessageTokens += n
	s.usage.SessionTokens += n
}

// theBudget words tokens used against a budget, as theLimit does.
func theBudget(used, budget int) string {
	if used > budget {
		return "over its budget of " + thousands(budget)
	}
	return "its budget"
}

// theLimit words value against limit: "the limit" when it reached it,
// "over the limit of N" past it (the worker granted more).
func theLimit(value, limit int) string {
	if value > limit {
		return fmt.Sprintf("over the limit of %d", limit)
	}
	return "the limit"
}

// repeatGuard counts the tool uses of a model turn and returns the guard
// they trip, if any: a call asked for MaxRepeats times.
func (s *Session) repeatGuard(uses []ToolUse) *GuardTripped {
	l := s.limits()
	var tripped *GuardTripped
	for _, u := range uses {
		key := u.Name + "\x00" + canonicalArgs(u.Arguments)
		if s.usage.Calls == nil {
			s.usage.Calls = map[string]int{}
		}
		s.usage.Calls[key]++
		if n := s.usage.Calls[key]; tripped == nil && l.MaxRepeats > 0 && n >= l.MaxRepeats {
			tripped = &GuardTripped{Guard: GuardRepeats, Limit: l.MaxRepeats, Value: n, Tool: u.Name,
				Message: fmt.Sprintf("Stopped: the model asked for %s with the same arguments %d times for one message, %s.", u.Name, n, theLimit(n, l.MaxRepeats))}
		}
	}
	return tripped
}

// trip stops the agent at g: pages see it, and the worker decides what
// follows (by default, nothing: the session goes idle). The event goes out
// as the worker is asked (decideQueued), after what was queued before it:
// the turn that tripped a guard ends with its message, then the
// guard.tripped, as a page draws them.
func (s *Session) trip(g GuardTripped) {
	if g.Guard == GuardSessionTokens {
		s.usage.BudgetTripped = true
	}
	s.logger.Warn("guard tripped: the model is not prompted again", "guard", g.Guard, "limit", g.Limit, "value", g.Value, "tool", g.Tool)
	s.e.opts.Metrics.GuardTripped(g.Guard)
	s.guardSpanEvent(g)
	s.failed = g.Message
	s.enqueue(g, Decision{})
}

// canonicalArgs is a tool use's arguments with object keys sorted and
// spaces removed, so the same arguments written twice compare equal.
// Arguments already written so (a model's usually are) are returned as
// they are, without the round trip through encoding/json.
func canonicalArgs(raw string) string {
	if c := (canonicalScanner{quickParser{s: raw}}); c.value(0) && c.i == len(raw) {
		return raw
	}
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	b, err := Marshal(v)
	if err != nil {
		return raw
	}
	return string(b)
}

// thousands writes n with thousands separators: 5,000,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// canonicalScanner checks that a JSON text is what json.Marshal writes for
// what json.Unmarshal reads from it into an any: no spaces, object keys in
// increasing order with none twice, strings without escapes or the
// characters Marshal escapes, integers a float64 holds exactly. It says
// no to anything else, which may still be canonical: the caller then makes
// sure the long way. It walks as quickParser does, building nothing.
// FuzzCanonicalArgs holds it to encoding/json.
type canonicalScanner struct {
	quickParser
}

func (c *canonicalScanner) value(depth int) bool {
	if c.i >= len(c.s) || depth > quickMaxDepth {
		return false
	}
	switch ch := c.s[c.i]; {
	case ch == '{':
		c.i++
		if c.i < len(c.s) && c.s[c.i] == '}' {
			c.i++
			return true
		}
		prev, first := "", true
		for {
			start := c.i + 1
			if !c.str() {
				return false
			}
			key := c.s[start : c.i-1]
			if !first && key <= prev {
				return false
			}
			prev, first = key, false
			if c.i >= len(c.s) || c.s[c.i] != ':' {
				return false
			}
			c.i++
			if !c.value(depth + 1) {
				return false
			}
			if closed, ok := c.next('}'); closed || !ok {
				return ok
			}
		}
	case ch == '[':
		c.i++
		if c.i < len(c.s) && c.s[c.i] == ']' {
			c.i++
			return true
		}
		for {
			if !c.value(depth + 1) {
				return false
			}
			if closed, ok := c.next(']'); closed || !ok {
				return ok
			}
		}
	case ch == '"':
		return c.str()
	case ch == '-' || ('1' <= ch && ch <= '9'):
		return c.integer()
	case ch == '0':
		c.i++
		return true
	}
	_, ok := c.literal()
	return ok
}

// next is quickParser's, with no space before the comma or the close.
func (c *canonicalScanner) next(close byte) (closed, ok bool) {
	if c.i < len(c.s) && c.s[c.i] <= ' ' {
		return false, false
	}
	return c.quickParser.next(close)
}

// str reads a string Marshal writes as it is: no escapes, no control
// characters, valid UTF-8 without U+2028 and U+2029 (escaped for
// JavaScript).
func (c *canonicalScanner) str() bool {
	if c.i >= len(c.s) || c.s[c.i] != '"' {
		return false
	}
	for c.i++; c.i < len(c.s); {
		switch ch := c.s[c.i]; {
		case ch == '"':
			c.i++
			return true
		case ch < 0x20, ch == '\\':
			return false
		case ch < utf8.RuneSelf:
			c.i++
		default:
			r, n := utf8.DecodeRuneInString(c.s[c.i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return false
			}
			c.i += n
		}
	}
	return false
}

// integer reads an integer of at most 15 digits, not -0: a float64 holds
// it exactly, and Marshal writes it back the same. A fraction or an
// exponent after it is no separator, so the caller declines the text.
func (c *canonicalScanner) integer() bool {
	if c.s[c.i] == '-' {
		c.i++
	}
	start := c.i
	return c.digits() && c.i-start <= 15 && c.s[start] != '0' // a leading zero, or -0
}
