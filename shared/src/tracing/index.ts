// Light helpers only: the SDK itself is loaded by the telemetry.js preload, never by importing @cgs/shared.
export * from "./span-helpers";
export * from "./telemetry-state";
export * from "./trace-carrier";
