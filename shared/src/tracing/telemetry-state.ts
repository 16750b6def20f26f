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

export function isTelemetryStarted(): boolean {
  return telemetryRegistry.get() !== undefined;
}
