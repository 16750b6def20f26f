import type { ErrorRequestHandler, RequestHandler } from "express";
import type { Logger } from "pino";
import { trace } from "@opentelemetry/api";
import { recordSpanError } from "./tracing/span-helpers";

/** Every error code the platform answers with, and its HTTP status (DESIGN §3, plus UNAVAILABLE, METHOD_NOT_ALLOWED and SPEND_LIMIT_REACHED). */
export const errorStatus = {
  UNAUTHENTICATED: 401,
  VALIDATION_ERROR: 400,
  INSUFFICIENT_CREDITS: 402,
  SESSION_ALREADY_RUNNING: 409,
  SESSION_NOT_RUNNING: 409,
  NOT_READY: 409,
  CLOUD_CAPACITY: 503,
  RATE_LIMITED: 429,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  RESET_TOKEN_EXPIRED: 400,
  RESET_TOKEN_INVALID: 400,
  PASSWORD_REUSED: 400,
  ACCOUNT_PENDING_DELETION: 409,
  SPEND_LIMIT_REACHED: 409,
  UNAVAILABLE: 503,
  INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export interface ErrorBody {
  error: ErrorCode;
  message: string;
}

export const UNAUTHENTICATED_MESSAGE = "Missing or invalid bearer token";
export const INTERNAL_MESSAGE = "Internal server error";

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.prototype.hasOwnProperty.call(errorStatus, value);
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers, e.g. Retry-After. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, status?: number, headers: Record<string, string> = {}) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.status = status ?? errorStatus[code];
    this.headers = headers;
  }

  withHeaders(headers: Record<string, string>): this {
    Object.assign(this.headers, headers);
    return this;
  }

  toBody(): ErrorBody {
    return { error: this.code, message: this.message };
  }

  /** `field` is a dotted path such as `preferences.fps`; the message must name it. */
  static validation(field: string, message?: string): AppError {
    const text =
      message === undefined
        ? `${field} is invalid`
        : message.includes(field)
          ? message
          : `${field} ${message}`;
    return new AppError("VALIDATION_ERROR", text);
  }

  static unauthenticated(): AppError {
    return new AppError("UNAUTHENTICATED", UNAUTHENTICATED_MESSAGE);
  }

  static notFound(message = "Resource not found"): AppError {
    return new AppError("NOT_FOUND", message);
  }

  static rateLimited(retryAfterSeconds: number, message = "Too many requests, retry later"): AppError {
    return new AppError("RATE_LIMITED", message, 429, {
      "Retry-After": String(Math.max(0, Math.ceil(retryAfterSeconds))),
    });
  }

  static unavailable(message = "Service temporarily unavailable", retryAfterSeconds?: number): AppError {
    const headers: Record<string, string> =
      retryAfterSeconds === undefined ? {} : { "Retry-After": String(Math.ceil(retryAfterSeconds)) };
    return new AppError("UNAVAILABLE", message, 503, headers);
  }

  static internal(): AppError {
    return new AppError("INTERNAL", INTERNAL_MESSAGE);
  }
}

// ---------- conversion of foreign errors ----------

interface ValidatorItem {
  path?: string;
  message?: string;
  errorCode?: string;
}

interface StatusLike {
  status?: unknown;
  statusCode?: unknown;
  type?: unknown;
  errors?: unknown;
  headers?: unknown;
  message?: unknown;
  limit?: unknown;
}

/** `/body/preferences/fps` -> `preferences.fps`; `/query/limit` -> `limit`; `.body.fps` -> `fps`. */
export function fieldFromValidatorPath(path: string | undefined): string {
  if (!path) return "body";
  const parts = path
    .replace(/^[./]+/, "")
    .split(/[./]/)
    .filter(Boolean);
  if (parts.length > 0 && ["body", "query", "params", "path", "headers", "cookies"].includes(parts[0]!)) {
    parts.shift();
  }
  return parts.length > 0 ? parts.join(".") : "body";
}

function validatorItemMessage(item: ValidatorItem): string {
  const field = fieldFromValidatorPath(item.path);
  const raw = item.message ?? "is invalid";
  const code = item.errorCode ?? "";
  let m: RegExpMatchArray | null;
  if (code.startsWith("additionalProperties") || /must NOT have additional properties/.test(raw)) {
    return `Unknown field: ${field}`;
  }
  if ((m = raw.match(/must have required property '([^']+)'/))) {
    const name = m[1]!;
    const missing =
      field === "body" ? name : field === name || field.endsWith(`.${name}`) ? field : `${field}.${name}`;
    return `${missing} is required`;
  }
  if ((m = raw.match(/must be equal to one of the allowed values:?\s*(.*)$/))) {
    return `${field} must be one of ${m[1]!.split(/,\s*/).join(", ")}`;
  }
  if (/^Unknown query parameter/.test(raw)) {
    const q = raw.match(/'([^']+)'/);
    return `Unknown field: ${q ? q[1]! : field}`;
  }
  return `${field} ${raw}`;
}

// PostgreSQL classes 08 (connection exception) and 57P (operator intervention: shutdown, cannot connect now),
// and the driver's own errors for a connection that dropped or never opened.
const DATABASE_UNAVAILABLE_CODES = /^(08|57P)/;
const DATABASE_UNAVAILABLE_ERRNOS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
]);
const DATABASE_UNAVAILABLE_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|the database system is (starting up|shutting down)/i;

/** True when the error (or one it wraps, e.g. DrizzleQueryError's cause) says the database cannot be reached. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 5; depth += 1) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (
      typeof code === "string" &&
      (DATABASE_UNAVAILABLE_CODES.test(code) || DATABASE_UNAVAILABLE_ERRNOS.has(code))
    )
      return true;
    if (typeof message === "string" && DATABASE_UNAVAILABLE_MESSAGES.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Turns anything thrown or passed to next() into an AppError; unknown errors become INTERNAL. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (isDatabaseUnavailable(err))
    return AppError.unavailable("The database is unavailable; try again shortly", 2);
  if (typeof err !== "object" || err === null) return AppError.internal();
  const e = err as StatusLike;
  const status =
    typeof e.status === "number" ? e.status : typeof e.statusCode === "number" ? e.statusCode : 0;

  // body-parser / raw-body errors
  if (e.type === "entity.too.large" || status === 413) {
    return new AppError("VALIDATION_ERROR", "body is larger than the allowed size", 413);
  }
  if (e.type === "entity.parse.failed") {
    return new AppError("VALIDATION_ERROR", "body is not valid JSON");
  }
  if (e.type === "encoding.unsupported" || e.type === "charset.unsupported") {
    return new AppError("VALIDATION_ERROR", "body has an unsupported encoding", 415);
  }

  // express-openapi-validator HttpError: {status, errors: [{path, message, errorCode}]}
  if (Array.isArray(e.errors) && status >= 400 && status < 500) {
    const items = e.errors as ValidatorItem[];
    if (status === 404) return AppError.notFound("Route not found");
    if (status === 405) {
      const headers =
        typeof e.headers === "object" && e.headers !== null ? (e.headers as Record<string, string>) : {};
      return new AppError("METHOD_NOT_ALLOWED", "Method not allowed", 405, { ...headers });
    }
    if (status === 415) {
      const noContentType = items.some((i) => /undefined$/.test(i.message ?? ""));
      return AppError.validation(
        "body",
        noContentType ? "body is required" : "body must be application/json",
      );
    }
    if (status === 401 || status === 403) return AppError.unauthenticated();
    const messages = [...new Set(items.map(validatorItemMessage))];
    return new AppError("VALIDATION_ERROR", messages.length > 0 ? messages.join("; ") : "request is invalid");
  }
  if (status === 404) return AppError.notFound("Route not found");
  if (status === 400) return new AppError("VALIDATION_ERROR", "request is invalid");
  return AppError.internal();
}

export interface ErrorHandlerOptions {
  logger: Logger;
}

/** The one error middleware: writes {error, message}, never a stack; logs unknown errors with the request id. */
export function errorHandler({ logger }: ErrorHandlerOptions): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const appError = toAppError(err);
    const requestId =
      (res.locals as { requestId?: string }).requestId ?? String((req as { id?: unknown }).id ?? "");
    const log = (req as { log?: Logger }).log ?? logger;
    const span = trace.getActiveSpan();
    if (appError.status >= 500 && span) recordSpanError(span, err);
    if (appError.status >= 500 && !(err instanceof AppError)) {
      log.error({ err, requestId }, "unhandled error");
    } else if (appError.status >= 500) {
      log.warn({ requestId, code: appError.code }, appError.message);
    }
    if (res.headersSent) {
      // The body is already streaming; the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    res.status(appError.status);
    for (const [name, value] of Object.entries(appError.headers)) res.setHeader(name, value);
    res.json(appError.toBody());
  };
}

/** Mount last, before errorHandler: any request no route answered is NOT_FOUND. */
export function notFoundHandler(): RequestHandler {
  return (_req, _res, next) => next(AppError.notFound("Route not found"));
}
