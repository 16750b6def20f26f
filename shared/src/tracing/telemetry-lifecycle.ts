import { createRequire } from "node:module";
import {
  context,
  diag,
  DiagConsoleLogger,
  propagation,
  trace,
  type TextMapPropagator,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  CompositePropagator,
  diagLogLevelFromString,
  getBooleanFromEnv,
  getStringFromEnv,
  getStringListFromEnv,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from "@opentelemetry/core";
import type { OTLPTraceExporter as OtlpExporter } from "@opentelemetry/exporter-trace-otlp-http";
import type { ZipkinExporter as Zipkin } from "@opentelemetry/exporter-zipkin";
import { registerInstrumentations, type Instrumentation } from "@opentelemetry/instrumentation";
import {
  defaultResource,
  detectResources,
  envDetector,
  hostDetector,
  processDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
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

// Only the exporter the process uses is loaded.
const load = createRequire(__filename);

function spanProcessorFor(kind: TracesExporterKind): SpanProcessor {
  switch (kind) {
    case "otlp": {
      const { OTLPTraceExporter } = load("@opentelemetry/exporter-trace-otlp-http") as {
        OTLPTraceExporter: typeof OtlpExporter;
      };
      return new BatchSpanProcessor(new OTLPTraceExporter());
    }
    case "console":
      return new SimpleSpanProcessor(new ConsoleSpanExporter());
    case "zipkin": {
      // The exporter reads OTEL_EXPORTER_ZIPKIN_ENDPOINT (default http://localhost:9411/api/v2/spans).
      const { ZipkinExporter } = load("@opentelemetry/exporter-zipkin") as { ZipkinExporter: typeof Zipkin };
      return new BatchSpanProcessor(new ZipkinExporter());
    }
    case "none":
      // Spans still get ids so traceparent propagates and logs carry trace_id.
      return noopProcessor;
  }
}

/** OTEL_PROPAGATORS (default tracecontext,baggage); this build carries no other propagator. */
function propagatorFromEnv(): TextMapPropagator | undefined {
  const names = getStringListFromEnv("OTEL_PROPAGATORS") ?? ["tracecontext", "baggage"];
  if (names.includes("none")) return undefined;
  const propagators: TextMapPropagator[] = [];
  for (const name of new Set(names)) {
    if (name === "tracecontext") propagators.push(new W3CTraceContextPropagator());
    else if (name === "baggage") propagators.push(new W3CBaggagePropagator());
    else diag.warn(`OTEL_PROPAGATORS: "${name}" is not available; supported: tracecontext, baggage, none`);
  }
  return new CompositePropagator({ propagators });
}

export interface TracingSetup {
  serviceName?: string;
  spanProcessors: SpanProcessor[];
  instrumentations: Instrumentation[];
  /** Adds OTEL_RESOURCE_ATTRIBUTES, host and process attributes to the resource (as NodeSDK did). Default true. */
  detectResources?: boolean;
}

/**
 * Registers tracing the way @opentelemetry/sdk-node's NodeSDK did for traces, without the rest of it: a tracer
 * provider (sampler and span limits from the standard OTEL_* variables), the AsyncLocalStorage context manager,
 * OTEL_PROPAGATORS, the resource and the instrumentations. NodeSDK also loaded the metrics and logs SDKs and every
 * exporter (about 2,000 modules; in the gateway 22 MB of heap and 40 MB of resident memory) for signals this
 * platform does not send through OpenTelemetry. Returns the provider (shutdown flushes and stops it).
 */
export function registerTracing(setup: TracingSetup): {
  shutdown(): Promise<void>;
  forceFlush(): Promise<void>;
} {
  const logLevel = getStringFromEnv("OTEL_LOG_LEVEL");
  if (logLevel) diag.setLogger(new DiagConsoleLogger(), { logLevel: diagLogLevelFromString(logLevel) });
  let resource = defaultResource();
  if (setup.detectResources !== false)
    resource = resource.merge(detectResources({ detectors: [envDetector, processDetector, hostDetector] }));
  if (setup.serviceName)
    resource = resource.merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: setup.serviceName }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: setup.spanProcessors });
  trace.setGlobalTracerProvider(provider);
  const contextManager = new AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  const propagator = propagatorFromEnv();
  if (propagator) propagation.setGlobalPropagator(propagator);
  registerInstrumentations({ instrumentations: setup.instrumentations, tracerProvider: provider });
  return provider;
}

/** Starts tracing once per process (nothing under OTEL_SDK_DISABLED=true); later calls return the running options. */
export function startTelemetry(options: TelemetryOptions): TelemetryOptions {
  const existing = telemetryRegistry.get();
  if (existing) return existing.options;
  if (getBooleanFromEnv("OTEL_SDK_DISABLED")) return options;
  const instrumentations = createInstrumentations();
  const sdk = registerTracing({
    serviceName: options.serviceName,
    instrumentations,
    spanProcessors: [spanProcessorFor(options.exporter)],
  });
  telemetryRegistry.set({ sdk, options, instrumentations });
  return options;
}
