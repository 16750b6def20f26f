import type { RequestHandler } from "express";
import type { Logger } from "pino";
import { assignRequestId } from "./request-id-middleware";

declare module "http" {
  interface IncomingMessage {
    /** The request's logger (child with requestId), set by loggingMiddleware. */
    log: Logger;
  }
}

const QUIET_PATHS = new Set(["/healthz", "/readyz"]);

function pathOf(url: string | undefined): string {
  const raw = url ?? "";
  const q = raw.indexOf("?");
  return q === -1 ? raw : raw.slice(0, q);
}

/**
 * Request id + one structured access log line per request. `req.log` is a child logger carrying
 * `requestId` so every line written while serving the request has it; it is made on first use only (a
 * child per request was a measurable share of the gateway's CPU). Headers are not logged at all (so no
 * Authorization or cookie), and neither is the query string (reset tokens travel there).
 */
export function loggingMiddleware(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const startedAt = performance.now();
    const requestId = assignRequestId(req, res);
    (req as { id?: unknown }).id = requestId;
    res.locals.requestId = requestId;
    let child: Logger | undefined;
    Object.defineProperty(req, "log", {
      configurable: true,
      enumerable: false,
      get: () => (child ??= logger.child({ requestId })),
      set: (value: Logger) => {
        child = value;
      },
    });
    const path = pathOf(req.originalUrl ?? req.url);
    if (!QUIET_PATHS.has(path)) {
      res.once("close", () => {
        const line = {
          requestId,
          req: { method: req.method, path, userAgent: req.headers["user-agent"] },
          res: { statusCode: res.statusCode },
          responseTime: Math.round(performance.now() - startedAt),
        };
        if (!res.writableFinished) logger.warn(line, "request aborted");
        else if (res.statusCode >= 500) logger.error(line, "request errored");
        else logger.info(line, "request completed");
      });
    }
    next();
  };
}
