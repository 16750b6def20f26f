import { NodeSDK } from "@opentelemetry/sdk-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { ZipkinExporter } from "@opentelemetry/exporter-zipkin";
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { createInstrumentations } from "./instrumentations";
import { telemetryRegistry, type TelemetryOptions, type TracesExporterKind } from "./telemetry-state";

/**
 * Zipkin (OTEL_EXPORTER_ZIPKIN_ENDPOINT) or console when asked for, OTLP when an endpoint is configured,
 * otherwise spans are made but not exported.
 */
export function telemetryOptionsFromEnv(env: NodeJS.ProcessEnv): TelemetryOptions {
  const requested = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  const hasEndpoint = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  let exporter: TracesExporterKind = "none";
  if (requested === "console") exporter = "console";
  else if (requested === "zipkin") exporter = "zipkin";
  else if (requested !== "none" && hasEndpoint) exporter = "otlp";
  return { serviceName: env.OTEL_SERVICE_NAME || undefined, exporter };
}

const noopProcessor: SpanProcessor = {
  onStart: () => undefined,
  onEnd: () => undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

function spanProcessorFor(kind: TracesExporterKind): SpanProcessor {
  switch (kind) {
    case "otlp":
      return new BatchSpanProcessor(new OTLPTraceExporter());
    case "console":
      return new SimpleSpanProcessor(new ConsoleSpanExporter());
    case "zipkin":
      // The exporter reads OTEL_EXPORTER_ZIPKIN_ENDPOINT (default http://localhost:9411/api/v2/spans).
      return new BatchSpanProcessor(new ZipkinExporter());
    case "none":
      // Spans still get ids so traceparent propagates and logs carry trace_id.
      return noopProcessor;
  }
}

/** Starts the OpenTelemetry SDK once per process; later calls return the running options. */
export function startTelemetry(options: TelemetryOptions): TelemetryOptions {
  const existing = telemetryRegistry.get();
  if (existing) return existing.options;
  const instrumentations = createInstrumentations();
  const sdk = new NodeSDK({
    serviceName: options.serviceName,
    instrumentations,
    spanProcessors: [spanProcessorFor(options.exporter)],
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  telemetryRegistry.set({ sdk, options, instrumentations });
  return options;
}
