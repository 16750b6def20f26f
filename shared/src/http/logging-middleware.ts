import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestHandler } from "express";
import type { Logger } from "pino";
import { pinoHttp } from "pino-http";
import { assignRequestId } from "./request-id-middleware";

const QUIET_PATHS = new Set(["/healthz", "/readyz"]);

function pathOf(url: string | undefined): string {
  const raw = url ?? "";
  const q = raw.indexOf("?");
  return q === -1 ? raw : raw.slice(0, q);
}

/**
 * Request id + one structured access log line per request. `req.log` is a child logger carrying
 * `requestId` so every line written while serving the request has it. Headers are not logged at all
 * (so no Authorization or cookie), and neither is the query string (reset tokens travel there).
 */
export function loggingMiddleware(logger: Logger): RequestHandler {
  const middleware = pinoHttp({
    logger,
    quietReqLogger: true,
    customAttributeKeys: { reqId: "requestId" },
    genReqId: (req: IncomingMessage, res: ServerResponse) => assignRequestId(req, res),
    autoLogging: { ignore: (req: IncomingMessage) => QUIET_PATHS.has(pathOf(req.url)) },
    customLogLevel: (_req, res, err) =>
      err || res.statusCode >= 500 ? "error" : res.statusCode >= 400 ? "info" : "info",
    serializers: {
      req: (req: { id?: unknown; method?: string; url?: string; headers?: Record<string, unknown> }) => ({
        method: req.method,
        path: pathOf(req.url),
        userAgent: req.headers?.["user-agent"],
      }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  });
  return (req, res, next) => {
    middleware(req, res);
    res.locals.requestId = String(req.id);
    next();
  };
}
