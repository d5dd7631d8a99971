package engine

import (
	"context"
	"log/slog"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/lazylog"
)

// The engine's spans, named and attributed as OpenTelemetry's GenAI
// semantic conventions say: invoke_agent for the answer to one user
// message, chat {model} for each model turn, execute_tool {tool} for each
// call, with a child span per attempt (the conventions have no attempt;
// ours are under clienttools.*). They are made on the session goroutine, and
// not at all while no tracer provider is set (the default): a span that
// records nothing would still cost its options, its context and its
// attributes at every step.

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/clienttools/gateway/engine"

// Attributes of ours, where the conventions have none.
const (
	attrHandler  = attribute.Key("clienttools.tool.handler")
	attrAttempt  = attribute.Key("clienttools.tool.attempt")
	attrAttempts = attribute.Key("clienttools.tool.attempts")
	attrPage     = attribute.Key("clienttools.page")
	attrGuard    = attribute.Key("clienttools.guard")
)

// isUnsetGlobal reports whether tp is otel's global provider as it is
// before anyone sets one: a no-op that delegates to the first provider
// set. Once one is, otel.GetTracerProvider returns that one instead.
func isUnsetGlobal(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// tracing reports whether spans are worth making: a provider was given,
// or the global one has been set since New.
func (e *Engine) tracing() bool {
	return !e.untilGlobalSet || otel.GetTracerProvider() != e.opts.TracerProvider
}

// noSpan is a span that records nothing, for a model turn while not tracing.
var noSpan = trace.SpanFromContext(context.Background())

func opName(op string) attribute.KeyValue { return attribute.String("gen_ai.operation.name", op) }

// startUserTurn opens the invoke_agent span of a user message, ending the
// last one if it is still open, and tags the session's log lines with it.
func (s *Session) startUserTurn() {
	s.endUserTurn()
	if !s.e.tracing() {
		return
	}
	ctx, span := s.e.tracer.Start(context.Background(), "invoke_agent", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(opName("invoke_agent"), attribute.String("gen_ai.conversation.id", s.id),
			attribute.String("gen_ai.request.model", s.agent.Model)))
	s.userTurn, s.userTurnCtx = span, ctx
	if sc := span.SpanContext(); sc.IsValid() {
		s.logger = lazylog.With(s.baseLogger, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
}

// endUserTurn ends the invoke_agent span, if one is open.
func (s *Session) endUserTurn() {
	if s.userTurn == nil {
		return
	}
	s.userTurn.End()
	s.userTurn, s.userTurnCtx = nil, nil
	s.logger = s.baseLogger
}

// turnContext is the context spans of this user message start from.
func (s *Session) turnContext() context.Context {
	if s.userTurnCtx != nil {
		return s.userTurnCtx
	}
	return context.Background()
}

// startChatSpan opens a model turn's span; ctx carries it to the model.
func (s *Session) startChatSpan(ctx context.Context) (context.Context, trace.Span) {
	if !s.e.tracing() {
		return ctx, noSpan
	}
	ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(s.turnContext()))
	return s.e.tracer.Start(ctx, "chat "+s.agent.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(opName("chat"), attribute.String("gen_ai.request.model", s.agent.Model),
			attribute.String("gen_ai.conversation.id", s.id)))
}

// endChatSpan ends a model turn's span with its usage and outcome.
func endChatSpan(span trace.Span, ev ModelFinishedEvent, err error) {
	if !span.IsRecording() { // no tracer provider: skip building attributes
		span.End()
		return
	}
	span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", ev.Usage.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", ev.Usage.OutputTokens))
	if ev.StopReason != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{ev.StopReason}))
	}
	// A turn the user stopped did not fail: its finish reason says so, as
	// the metrics count it cancelled, not an error.
	if err != nil && ev.StopReason != model.StopCancelled {
		span.SetAttributes(attribute.String("error.type", ev.StopReason))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startCallSpan opens a call's execute_tool span.
func (s *Session) startCallSpan(c *call) {
	if !s.e.tracing() {
		return // c.span stays nil, as for a call restored from the journal
	}
	// A tool the model made up is named as the metrics name it: its name
	// is the model's text, and span names are indexed.
	name := c.toolLabel()
	_, c.span = s.e.tracer.Start(s.turnContext(), "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(opName("execute_tool"), attribute.String("gen_ai.tool.name", name),
			attribute.String("gen_ai.tool.call.id", c.id), attribute.String("gen_ai.tool.type", "function"),
			attribute.String("gen_ai.conversation.id", s.id), attrHandler.String(string(c.handler))))
}

// startAttemptSpan opens the span of c's current attempt, a child of its
// call's; a worker attempt's context carries it to the worker.
func (s *Session) startAttemptSpan(c *call) {
	if c.span == nil {
		return // a call restored from the journal: its span died with its process
	}
	ctx := trace.ContextWithSpan(context.Background(), c.span)
	c.attemptCtx, c.attemptSpan = s.e.tracer.Start(ctx, "attempt", trace.WithAttributes(attrAttempt.Int(c.attempt)))
}

// attemptDelivered notes which page runs a client attempt.
func (c *call) attemptDelivered(page string) {
	if c.attemptSpan != nil && c.attemptSpan.IsRecording() {
		c.attemptSpan.AddEvent("delivered", trace.WithAttributes(attrPage.String(page)))
		c.attemptSpan.SetAttributes(attrPage.String(page))
	}
}

// endAttemptSpan ends the current attempt's span; why is "" for an answer.
func (c *call) endAttemptSpan(why CancelReason) {
	if c.attemptSpan == nil {
		return
	}
	if why != "" && c.attemptSpan.IsRecording() {
		c.attemptSpan.SetAttributes(attribute.String("error.type", string(why)))
		c.attemptSpan.SetStatus(codes.Error, string(why))
	}
	c.attemptSpan.End()
	c.attemptSpan, c.attemptCtx = nil, nil
}

// endCallSpan ends a settled call's span with its outcome.
func (c *call) endCallSpan(o outcome) {
	if c.span == nil {
		return
	}
	if !c.span.IsRecording() {
		c.span.End()
		c.span = nil
		return
	}
	c.span.SetAttributes(attrAttempts.Int(c.attempt))
	if !o.ok {
		c.span.SetAttributes(attribute.String("error.type", string(o.code)))
		c.span.SetStatus(codes.Error, o.err)
	}
	c.span.End()
	c.span = nil
}

// leaveSpans ends c's spans as its session leaves this process (a
// restart, an unload, a move to another node): the call is not over, and
// goes on where the session loads next, so its spans end with an event
// that says so, and no error.
func (c *call) leaveSpans() {
	for _, sp := range []trace.Span{c.attemptSpan, c.span} {
		if sp != nil {
			sp.AddEvent("session left this process")
			sp.End()
		}
	}
	c.attemptSpan, c.attemptCtx, c.span = nil, nil, nil
}

// guardSpanEvent notes a tripped guard on the user message's span.
func (s *Session) guardSpanEvent(g GuardTripped) {
	if s.userTurn != nil {
		s.userTurn.AddEvent("guard.tripped", trace.WithAttributes(attrGuard.String(g.Guard),
			attribute.Int("clienttools.guard.limit", g.Limit), attribute.Int("clienttools.guard.value", g.Value)))
	}
}
