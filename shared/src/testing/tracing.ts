import { context, propagation, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { createInstrumentations } from "../tracing/instrumentations";
import { registerTracing } from "../tracing/telemetry-lifecycle";

export interface TestTracing {
  exporter: InMemorySpanExporter;
  /** Finished spans so far. */
  spans(): ReadableSpan[];
  reset(): void;
  shutdown(): Promise<void>;
}

/**
 * In-memory tracing with the production instrumentations, for tests. Instrumentations that hook
 * `require` may not patch modules jest loads through its own registry; spans made through
 * @opentelemetry/api (publisher, relay, consumer) are always captured.
 */
export function setupTestTracing(options: { serviceName?: string; instrument?: boolean } = {}): TestTracing {
  const exporter = new InMemorySpanExporter();
  const sdk = registerTracing({
    serviceName: options.serviceName ?? "test",
    instrumentations: options.instrument === false ? [] : createInstrumentations(),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    detectResources: false,
  });
  return {
    exporter,
    spans: () => exporter.getFinishedSpans(),
    reset: () => exporter.reset(),
    async shutdown() {
      await sdk.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** A span as received over OTLP/HTTP JSON, flattened with its process's service name. */
export interface CollectedSpan {
  serviceName: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean | undefined>;
  status?: { code?: number; message?: string };
  events: { name: string }[];
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  endpoint: string;
  spans(): CollectedSpan[];
  close(): Promise<void>;
}

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
type OtlpAttribute = { key: string; value: OtlpValue };
type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  status?: { code?: number; message?: string };
  events?: { name: string }[];
};
type OtlpRequest = {
  resourceSpans?: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
};

function attributeValue(value: OtlpValue): string | number | boolean | undefined {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  return value.boolValue ?? value.doubleValue;
}

function attributeMap(attributes: OtlpAttribute[] = []): CollectedSpan["attributes"] {
  return Object.fromEntries(attributes.map((a) => [a.key, attributeValue(a.value)]));
}

/** A tiny OTLP/HTTP JSON collector for tests that run real processes preloaded with telemetry.js. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const http = await import("node:http");
  const collected: CollectedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpRequest;
        for (const resourceSpans of body.resourceSpans ?? []) {
          const serviceName = String(attributeMap(resourceSpans.resource?.attributes)["service.name"] ?? "");
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              collected.push({
                serviceName,
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId || undefined,
                name: span.name,
                kind: span.kind,
                attributes: attributeMap(span.attributes),
                status: span.status,
                events: span.events ?? [],
              });
            }
          }
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    spans: () => [...collected],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
