// Kept on globalThis so every copy of this module (preload vs. app, dist vs. src) sees the same SDK,
// and so importing it never loads the SDK itself.
const STATE_KEY = Symbol.for("cgs.shared.telemetry");

export type TracesExporterKind = "otlp" | "zipkin" | "console" | "none";

export interface TelemetryOptions {
  serviceName?: string;
  exporter: TracesExporterKind;
}

export interface RunningTelemetry {
  sdk: { shutdown(): Promise<void> };
  options: TelemetryOptions;
  /** What the preload patched, so a process can turn one off (see takeOverHttpServerSpans). */
  instrumentations?: ReadonlyArray<{ instrumentationName: string; disable(): void }>;
}

const holder = globalThis as typeof globalThis & { [STATE_KEY]?: RunningTelemetry };

export const telemetryRegistry = {
  get: (): RunningTelemetry | undefined => holder[STATE_KEY],
  set: (state: RunningTelemetry): void => {
    holder[STATE_KEY] = state;
  },
  clear: (): void => {
    delete holder[STATE_KEY];
  },
};

/** Flushes and stops the SDK; call last when draining on SIGTERM. Safe when telemetry never started. */
export async function shutdownTelemetry(): Promise<void> {
  const state = telemetryRegistry.get();
  if (!state) return;
  telemetryRegistry.clear();
  await state.sdk.shutdown();
}

const HTTP_INSTRUMENTATION = "@opentelemetry/instrumentation-http";

/**
 * For a process that makes its own server spans (the gateway): turns the preload's HTTP instrumentation off, so
 * node:http is no longer patched (its per-request wrapping of every request and response, even when a request is
 * ignored, cost the gateway about half its throughput). The process must then start one span per request and
 * inject the trace context into the requests it forwards. Returns whether telemetry is running.
 */
export function takeOverHttpServerSpans(): boolean {
  const state = telemetryRegistry.get();
  for (const instrumentation of state?.instrumentations ?? []) {
    if (instrumentation.instrumentationName === HTTP_INSTRUMENTATION) instrumentation.disable();
  }
  return state !== undefined;
}

export function isTelemetryStarted(): boolean {
  return telemetryRegistry.get() !== undefined;
}
