import type { IncomingMessage, ServerResponse } from "node:http";
import { context, trace, type SpanContext } from "@opentelemetry/api";
import express, { type RequestHandler } from "express";
import pino, { type Logger } from "pino";
import { assignRequestId } from "./request-id-middleware";

declare module "http" {
  interface IncomingMessage {
    /** The request's logger (child with requestId), set by loggingMiddleware. */
    log: Logger;
  }
}

const QUIET_PATHS = new Set(["/healthz", "/readyz"]);
const ACCESS = Symbol("cgs.accessLog");

/** What the access log line needs, kept on the request: one object a request, no closures. */
interface AccessState {
  logger: Logger;
  requestId: string;
  startedAt: number;
  path: string;
  /** The span active when the request came in (the server span), for the line's trace fields. */
  span: SpanContext | undefined;
  child: Logger | undefined;
}

type Tracked = IncomingMessage & { [ACCESS]?: AccessState };

// `req.log`, once for every Express request (express.request is the prototype every app's requests inherit): the
// child logger is made on first use only, from the request's state.
Object.defineProperty(express.request, "log", {
  configurable: true,
  enumerable: false,
  get(this: Tracked): Logger | undefined {
    const state = this[ACCESS];
    if (!state) return undefined;
    return (state.child ??= state.logger.child({ requestId: state.requestId }));
  },
  set(this: Tracked, value: Logger) {
    const state = this[ACCESS];
    if (state) state.child = value;
    else Object.defineProperty(this, "log", { value, writable: true, configurable: true });
  },
});

function pathOf(url: string | undefined): string {
  const raw = url ?? "";
  const q = raw.indexOf("?");
  return q === -1 ? raw : raw.slice(0, q);
}

const { symbols } = pino;

/** The parts of a pino logger the access line is written with (pino exports these symbols as `pino.symbols`). */
interface PinoInternals {
  [symbols.streamSym]: { write(line: string): unknown; [symbols.needsMetadataGsym]?: boolean };
  [symbols.lsCacheSym]: Record<number, string>;
  [symbols.timeSym]: () => string;
  [symbols.chindingsSym]: string;
  [symbols.endSym]: string;
  [symbols.hooksSym]: { streamWrite?: unknown };
  [symbols.mixinSym]?: { name?: string };
}

type Level = "info" | "warn" | "error";
const MESSAGES: Record<Level, string> = {
  info: "request completed",
  warn: "request aborted",
  error: "request errored",
};

/**
 * Writes the access line the way pino writes `logger[level]({trace…, requestId, req, res, responseTime}, msg)`,
 * byte for byte, without pino's per-line work (merging, redaction, serializing an object): the line has fixed keys,
 * none of them redacted (no headers, no query), so it is assembled as one string and handed to the logger's own
 * stream. The trace fields are the ones @opentelemetry/instrumentation-pino's mixin adds, from the span active when
 * the request arrived. A logger whose output is transformed (a stream that wants metadata, a write hook, a mixin
 * other than OpenTelemetry's) gets the line through pino instead.
 */
function accessLogWriter(logger: Logger): (level: Level, state: AccessState, res: ServerResponse) => void {
  const internals = logger as unknown as PinoInternals;
  const mixin = internals[symbols.mixinSym];
  const direct =
    internals[symbols.streamSym][symbols.needsMetadataGsym] !== true &&
    !internals[symbols.hooksSym].streamWrite &&
    (!mixin || mixin.name === "otelMixin");
  const levels = logger.levels.values;
  return (level, state, res) => {
    const { method, headers } = res.req;
    const statusCode = res.statusCode;
    const responseTime = Math.round(performance.now() - state.startedAt);
    const span = state.span;
    if (!direct) {
      const trace = span
        ? { trace_id: span.traceId, span_id: span.spanId, trace_flags: `0${span.traceFlags.toString(16)}` }
        : {};
      const req = { method, path: state.path, userAgent: headers["user-agent"] };
      logger[level](
        { ...trace, requestId: state.requestId, req, res: { statusCode }, responseTime },
        MESSAGES[level],
      );
      return;
    }
    const userAgent = headers["user-agent"];
    internals[symbols.streamSym].write(
      internals[symbols.lsCacheSym][levels[level]!] +
        internals[symbols.timeSym]() +
        internals[symbols.chindingsSym] +
        (span
          ? `,"trace_id":"${span.traceId}","span_id":"${span.spanId}","trace_flags":"0${span.traceFlags.toString(16)}"`
          : "") +
        `,"requestId":"${state.requestId}","req":{"method":${JSON.stringify(method)},"path":${JSON.stringify(state.path)}` +
        (userAgent === undefined ? "" : `,"userAgent":${JSON.stringify(userAgent)}`) +
        `},"res":{"statusCode":${statusCode}},"responseTime":${responseTime},"msg":"${MESSAGES[level]}"` +
        internals[symbols.endSym],
    );
  };
}

/**
 * Request id + one structured access log line per request. `req.log` is a child logger carrying
 * `requestId` so every line written while serving the request has it; it is made on first use only (a
 * child per request was a measurable share of the gateway's CPU). Headers are not logged at all (so no
 * Authorization or cookie), and neither is the query string (reset tokens travel there). The line is written when
 * the response closes: "request completed", "request errored" for a 5xx, "request aborted" when the client left
 * first. Nothing here allocates per request beyond the request's state and the line itself.
 */
export function loggingMiddleware(logger: Logger): RequestHandler {
  const write = accessLogWriter(logger);

  function onClose(this: ServerResponse): void {
    const state = (this.req as Tracked)[ACCESS];
    if (!state) return;
    const level: Level = !this.writableFinished ? "warn" : this.statusCode >= 500 ? "error" : "info";
    if (logger.isLevelEnabled(level)) write(level, state, this);
  }

  return (req, res, next) => {
    const startedAt = performance.now();
    const requestId = assignRequestId(req, res);
    (req as { id?: unknown }).id = requestId;
    res.locals.requestId = requestId;
    const path = pathOf(req.originalUrl ?? req.url);
    const span = trace.getSpan(context.active())?.spanContext();
    (req as Tracked)[ACCESS] = {
      logger,
      requestId,
      startedAt,
      path,
      span: span && trace.isSpanContextValid(span) ? span : undefined,
      child: undefined,
    };
    if (!QUIET_PATHS.has(path)) res.on("close", onClose);
    next();
  };
}
