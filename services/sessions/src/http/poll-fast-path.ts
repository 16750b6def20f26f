import { createHash } from "node:crypto";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Express, Request } from "express";
import type { Logger } from "pino";
import { trace } from "@opentelemetry/api";
import {
  AppError,
  assignRequestId,
  extractToken,
  metrics,
  nameServerSpanByRoute,
  recordSpanError,
  toAppError,
  type JwtVerifier,
  type Principal,
} from "@cgs/shared";
import type { SessionStatus } from "../domain/session-status";

export const POLL_PATH = "/api/v1/sessions/poll";

export interface PollFastPathDeps {
  verifier: JwtVerifier;
  logger: Logger;
  poll(accountId: string): Promise<SessionStatus>;
}

/** The weak ETag Express puts on a JSON answer (the `etag` package's format), so both paths answer alike. */
function weakEtag(body: string): string {
  const hash = createHash("sha1").update(body, "utf8").digest("base64").slice(0, 27);
  return `W/"${Buffer.byteLength(body, "utf8").toString(16)}-${hash}"`;
}

/**
 * GET /api/v1/sessions/poll without Express: clients call it every second or so until their session is ready,
 * which makes it the service's hottest request by far, and Express's routing, its per-layer telemetry spans
 * and the per-request child logger cost several times the poll itself (see the README's benchmark section).
 *
 * A verified poll is answered here, with what the Express route answers (status, body, Cache-Control, ETag,
 * X-Request-Id, the access log line, the request metrics), its failure too (the one error model's body and status;
 * handing it to Express would query the failing database a second time). Anything else — no or bad token, an
 * identity-provider outage, a conditional request — goes to the Express app untouched, which judges it again.
 */
export function withPollFastPath(app: Express, deps: PollFastPathDeps): RequestListener {
  const requests = metrics.httpRequests.labels("GET", POLL_PATH, "200");
  const duration = metrics.httpDuration.labels("GET", POLL_PATH);

  const answer = async (req: IncomingMessage, res: ServerResponse, started: number): Promise<void> => {
    const credential = extractToken(req as Request);
    let principal: Principal;
    try {
      if (!credential) throw new Error("no credential");
      principal = await deps.verifier.verify(credential.token);
    } catch {
      app(req as Request, res as never);
      return;
    }
    let status: SessionStatus;
    try {
      status = await deps.poll(principal.identityUserId);
    } catch (err) {
      // Answered here: Express would run the same failing query a second time.
      failed(req, res, started, err);
      return;
    }
    const requestId = assignRequestId(req, res);
    const body = JSON.stringify(status);
    res.writeHead(200, {
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": Buffer.byteLength(body, "utf8"),
      "Cache-Control": "no-store",
      ETag: weakEtag(body),
    });
    res.end(body);
    const seconds = (performance.now() - started) / 1000;
    requests.inc();
    duration.observe(seconds);
    if (deps.logger.isLevelEnabled("info")) {
      deps.logger.info(
        {
          requestId,
          req: { method: "GET", path: POLL_PATH, userAgent: req.headers["user-agent"] },
          res: { statusCode: 200 },
          responseTime: Math.round(seconds * 1000),
        },
        "request completed",
      );
    }
  };

  /** The poll's own failure, through the one error model: {error, message}, the status's headers, no internals. */
  const failed = (req: IncomingMessage, res: ServerResponse, started: number, err: unknown): void => {
    const requestId = assignRequestId(req, res);
    const appError = toAppError(err);
    const span = trace.getActiveSpan();
    if (appError.status >= 500 && span) recordSpanError(span, err);
    if (!(err instanceof AppError)) deps.logger.error({ err, requestId }, "unhandled error");
    else if (appError.status >= 500) deps.logger.warn({ requestId, code: appError.code }, appError.message);
    const body = JSON.stringify(appError.toBody());
    res.writeHead(appError.status, {
      ...appError.headers,
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": Buffer.byteLength(body, "utf8"),
    });
    res.end(body);
    const seconds = (performance.now() - started) / 1000;
    metrics.httpRequests.labels("GET", POLL_PATH, String(appError.status)).inc();
    duration.observe(seconds);
    const serverError = appError.status >= 500;
    deps.logger[serverError ? "error" : "info"](
      {
        requestId,
        req: { method: "GET", path: POLL_PATH, userAgent: req.headers["user-agent"] },
        res: { statusCode: appError.status },
        responseTime: Math.round(seconds * 1000),
      },
      serverError ? "request errored" : "request completed",
    );
  };

  return (req, res) => {
    const url = req.url ?? "";
    const query = url.indexOf("?");
    const path = query === -1 ? url : url.slice(0, query);
    if (
      req.method !== "GET" ||
      path !== POLL_PATH ||
      req.headers["if-none-match"] !== undefined ||
      req.headers["if-modified-since"] !== undefined
    ) {
      app(req as Request, res as never);
      return;
    }
    // Name the server span by route, as the Express instrumentation does for the other routes.
    nameServerSpanByRoute("GET", POLL_PATH);
    void answer(req, res, performance.now());
  };
}
