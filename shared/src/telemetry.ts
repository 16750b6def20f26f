/**
 * Preload: `node --import @cgs/shared/dist/telemetry.js dist/main.js`. Must run before the app's
 * modules load so http, express, pg, aws-sdk and pino are patched when first required.
 */
import { startTelemetry, telemetryOptionsFromEnv } from "./tracing/telemetry-lifecycle";

startTelemetry(telemetryOptionsFromEnv(process.env));
