import { context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { registerTracing, telemetryOptionsFromEnv } from "./telemetry-lifecycle";

describe("telemetryOptionsFromEnv", () => {
  it("when an OTLP endpoint is configured, then spans go to OTLP under OTEL_SERVICE_NAME", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_SERVICE_NAME: "billing",
      }),
    ).toEqual({ exporter: "otlp", serviceName: "billing" });
    expect(
      telemetryOptionsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }).exporter,
    ).toBe("otlp");
  });

  it("when OTEL_TRACES_EXPORTER=console, then spans are printed even with an endpoint set", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_TRACES_EXPORTER: "console",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      }).exporter,
    ).toBe("console");
  });

  it("when OTEL_TRACES_EXPORTER=zipkin, then spans go to Zipkin even with an OTLP endpoint set", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_TRACES_EXPORTER: "zipkin",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_SERVICE_NAME: "gateway",
      }),
    ).toEqual({ exporter: "zipkin", serviceName: "gateway" });
  });

  it("when nothing is configured or the exporter is none, then nothing is exported", () => {
    expect(telemetryOptionsFromEnv({})).toEqual({ exporter: "none", serviceName: undefined });
    expect(
      telemetryOptionsFromEnv({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })
        .exporter,
    ).toBe("none");
  });
});

describe("registerTracing", () => {
  const saved = { ...process.env };
  let running: ReturnType<typeof registerTracing> | undefined;

  /** Registers tracing under env (the standard OTEL_* variables) and records spans in memory. */
  function register(env: Record<string, string>): InMemorySpanExporter {
    Object.assign(process.env, env);
    const exporter = new InMemorySpanExporter();
    running = registerTracing({
      serviceName: "billing",
      instrumentations: [],
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    return exporter;
  }

  afterEach(async () => {
    await running?.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
    for (const key of [
      "OTEL_TRACES_SAMPLER",
      "OTEL_TRACES_SAMPLER_ARG",
      "OTEL_PROPAGATORS",
      "OTEL_RESOURCE_ATTRIBUTES",
    ])
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
  });

  it("when OTEL_TRACES_SAMPLER=always_off, then spans record nothing", () => {
    const exporter = register({ OTEL_TRACES_SAMPLER: "always_off" });
    const span = trace.getTracer("test").startSpan("work");
    expect(span.isRecording()).toBe(false);
    span.end();
    expect(exporter.getFinishedSpans()).toHaveLength(0);
  });

  it("when the sampler is traceidratio 1, then a span is recorded under the service's resource", async () => {
    const exporter = register({
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "1",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=staging",
    });
    trace.getTracer("test").startSpan("work").end();
    // The host and process attributes are detected asynchronously; the span is exported once they are in.
    await running?.forceFlush();
    const [span] = exporter.getFinishedSpans();
    expect(span?.name).toBe("work");
    expect(span?.resource.attributes).toMatchObject({
      "service.name": "billing",
      "deployment.environment.name": "staging",
      "process.pid": process.pid,
    });
    expect(span?.resource.attributes["host.name"]).toEqual(expect.any(String));
  });

  it("when OTEL_PROPAGATORS is unset, then trace context and baggage go out; set to tracecontext, only the trace", () => {
    const carrierUnder = (env: Record<string, string>): Record<string, string> => {
      register(env);
      const span = trace.getTracer("test").startSpan("work");
      const withBaggage = propagation.setBaggage(
        trace.setSpan(ROOT_CONTEXT, span),
        propagation.createBaggage({ tenant: { value: "a" } }),
      );
      const carrier: Record<string, string> = {};
      propagation.inject(withBaggage, carrier);
      span.end();
      return carrier;
    };
    const both = carrierUnder({});
    expect(both.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(both.baggage).toBe("tenant=a");
    propagation.disable();
    const traceOnly = carrierUnder({ OTEL_PROPAGATORS: "tracecontext" });
    expect(traceOnly.traceparent).toMatch(/^00-/);
    expect(traceOnly.baggage).toBeUndefined();
  });
});
