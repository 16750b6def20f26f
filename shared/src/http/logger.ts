import pino, { type Logger } from "pino";

export interface CreateLoggerOptions {
  name: string;
  level?: string;
  /** Extra base bindings, e.g. {version}. */
  base?: Record<string, unknown>;
}

/** Paths that must never reach a log line. */
export const redactedLogPaths = [
  "req.headers.authorization",
  "req.headers.cookie",
  "res.headers['set-cookie']",
  "headers.authorization",
  "headers.cookie",
  "authorization",
  "cookie",
  "password",
  "token",
  "accessToken",
];

export function createLogger({ name, level = "info", base = {} }: CreateLoggerOptions): Logger {
  return pino({
    name,
    level,
    base: { service: name, ...base },
    redact: { paths: redactedLogPaths, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
