import type { RequestListener } from "node:http";
import type { Express, RequestHandler } from "express";
import type { Logger } from "pino";
import {
  AppError,
  errorHandler,
  frontHandlers,
  handlerChain,
  HEADERS,
  nameServerSpanByRoute,
} from "@cgs/shared";
import { matchedRoutePath, routeOf, type GatewayLocals, type RawBodyRequest } from "./gateway-locals";
import { bearerChallenge } from "./protected-resource-metadata";
import type { RateLimiters } from "./rate-limit-middleware";
import type { RouteTable } from "./route-table";
import { apiSecurityHeaders } from "./security-headers";
import type { Forwarder } from "./upstream-proxy";

export interface ApiChainOptions {
  /** The gateway's Express app: the chain's requests and responses get its prototypes and settings. */
  app: Express;
  logger: Logger;
  /** The documented operations, each with its owner's URL, public flag, rate-limit bucket and body handling. */
  table: RouteTable;
  limiters: RateLimiters;
  forward: Forwarder;
  publicBaseUrl: string;
  /** Reported by GET /api/v1/health. */
  appVersion: string;
  /** Runs after the route lookup (createAuthentication): sets res.locals' principal and token, or fails. */
  authenticate: RequestHandler;
  /** Run after the rate limit, in order (createRequestValidation): the body parsed, the request validated. */
  validation: readonly RequestHandler[];
}

const AUTH_METHOD_HEADER = HEADERS.authMethod;

/**
 * The listener for every /api/ request: one fixed handler chain (handlerChain, no Express routing) of metrics and
 * access log → the OWASP REST security headers → route lookup in the table (404 for an undocumented path, 405 with
 * Allow for a documented path's other methods) → the gateway's own operation (GET /api/v1/health) →
 * authentication → the operation's rate limit → validation → the per-e-mail limit of password-reset requests →
 * forwarding to the owning service with the verified token as Bearer. Errors answer `{error, message}`, and a 401
 * carries the RFC 9728 bearer challenge.
 */
export function createApiChain(options: ApiChainOptions): RequestListener {
  const { table, limiters, forward, logger } = options;

  const resolveRoute: RequestHandler = (req, res, next) => {
    const match = table.match(req.method, req.path);
    if (match.kind === "found") {
      (res.locals as GatewayLocals).route = match.route;
      // The server span is named by the documented route, so traces group by operation.
      nameServerSpanByRoute(match.route.method, match.route.path);
      next();
      return;
    }
    // RFC 9110 §15.5.6: a known path with a method it does not support is 405 and lists the ones it does.
    next(
      match.kind === "method-not-allowed"
        ? new AppError(
            "METHOD_NOT_ALLOWED",
            `${req.method} is not allowed on ${req.path}; allowed: ${match.allow.join(", ")}`,
          ).withHeaders({ Allow: match.allow.join(", ") })
        : AppError.notFound("Route not found"),
    );
  };

  const gatewayOwned: RequestHandler = (_req, res, next) => {
    const route = routeOf(res);
    if (route.upstream !== null) {
      next();
      return;
    }
    if (route.operationId === "getHealth") {
      res.setHeader("Cache-Control", "no-store");
      res.json({ status: "ok", version: options.appVersion });
      return;
    }
    next(AppError.notFound("Route not found"));
  };

  const limit: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    if (!route.rateLimit) {
      next();
      return;
    }
    void limiters.forBucket(route.rateLimit)(req, res, next);
  };

  const perEmail: RequestHandler = (req, res, next) =>
    routeOf(res).operationId === "requestPasswordReset" ? void limiters.resetEmail(req, res, next) : next();

  const proxy: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    const locals = res.locals as GatewayLocals;
    // Tells accounts how the caller authenticated (GET /api/v1/session); never taken from the client.
    if (route.public || !locals.credentialSource) delete req.headers[AUTH_METHOD_HEADER];
    else req.headers[AUTH_METHOD_HEADER] = locals.credentialSource;
    forward(req, res, next, {
      upstream: route.upstream!,
      owner: route.owner,
      token: route.public ? undefined : locals.accessToken,
      body: route.rawBody ? "stream" : (req as RawBodyRequest).rawBody,
    });
  };

  return handlerChain(
    options.app,
    [
      ...frontHandlers({ logger, metricsRoute: matchedRoutePath }),
      apiSecurityHeaders(options.publicBaseUrl),
      resolveRoute,
      gatewayOwned,
      options.authenticate,
      limit,
      ...options.validation,
      perEmail,
      proxy,
    ],
    [bearerChallenge(options.publicBaseUrl), errorHandler({ logger })],
  );
}
