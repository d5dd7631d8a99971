package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// defaultOTLPEndpoint is where spans go with OTEL_TRACES_EXPORTER=otlp and
// no endpoint: the OTLP specification's default for OTLP over HTTP.
const defaultOTLPEndpoint = "localhost:4318"

// startTracing turns tracing on when the standard OpenTelemetry environment
// asks for it: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or OTEL_TRACES_EXPORTER=otlp; never
// with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. The exporter
// speaks OTLP over HTTP and reads the rest of its settings (headers,
// timeout, protocol details) from the same environment, and the sampler
// from OTEL_TRACES_SAMPLER. It returns the function that flushes and stops
// it, or nil when tracing stays off.
func startTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (func(context.Context) error, error) {
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch {
	case strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true"), exporter == "none":
		return nil, nil
	case exporter != "" && exporter != "otlp":
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: this gateway exports traces with otlp (or none)", exporter)
	case exporter == "" && endpoint == "":
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if endpoint == "" && getenv("OTEL_EXPORTER_OTLP_INSECURE") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE") == "" {
		// OTLP's default endpoint is plain HTTP on localhost (the
		// specification's, and what operations.md says); the exporter's
		// own default would be HTTPS, which a local collector does not
		// speak.
		endpoint = "http://" + defaultOTLPEndpoint
		opts = append(opts, otlptracehttp.WithEndpoint(defaultOTLPEndpoint), otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("failed to start the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("clienttools-gateway")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithHost(), resource.WithProcessPID())
	if err != nil {
		return nil, fmt.Errorf("failed to describe this process for traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	logger.Info("tracing on: spans go to the OTLP endpoint", "endpoint", endpoint)
	return tp.Shutdown, nil
}
