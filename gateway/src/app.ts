import http from "node:http";
import type { Dispatcher } from "undici";
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import * as OpenApiValidator from "express-openapi-validator";
import type { Logger } from "pino";
import {
  AppError,
  createBaseApp,
  errorHandler,
  extractToken,
  frontHandlers,
  handlerChain,
  HEADERS,
  installErrorHandlers,
  isIdentityOutage,
  loadOpenApiDocument,
  nameServerSpanByRoute,
  type AuthLocals,
  type JwtVerifier,
  type HttpMethod,
  type OpenApiDocument,
  type ReadinessCheck,
} from "@cgs/shared";
import type { GatewayConfig } from "./config";
import { buildRouteTable, type RouteEntry, type UpstreamUrls } from "./http/route-table";
import { createRateLimiters, type RedisCommandSender } from "./http/rate-limit-middleware";
import { dnsReplicaCount, staticReplicaCount, type ReplicaCount } from "./http/replica-count";
import { bearerChallenge, protectedResourceMetadata } from "./http/protected-resource-metadata";
import { apiSecurityHeaders, securityHeaders } from "./http/security-headers";
import { createUpstreamPool, createUpstreamProxy } from "./http/upstream-proxy";
import { withServerSpans } from "./http/server-span";
import { createOidcClient, type OidcClient } from "./portal/oidc-login";
import { portalCookieSecret } from "./portal/portal-config";
import { portalRoutes } from "./portal/portal-routes";
import { createRedisRefreshCoordinator } from "./portal/refresh-coordinator";
import { createBrowserSessions } from "./portal/session-refresh";

export interface GatewayDeps {
  config: GatewayConfig;
  logger: Logger;
  verifier: JwtVerifier;
  /** The API contract; defaults to shared/openapi.json. */
  openapi?: OpenApiDocument;
  /** Shared rate-limit counters; omit for in-memory (single replica). */
  redis?: RedisCommandSender;
  /** Keep-alive pool for upstream calls (createUpstreamPool); main.ts owns and closes it. */
  upstreamPool?: Dispatcher;
  /** The portal's OIDC client; defaults to discovery from OIDC_ISSUER. */
  oidc?: OidcClient;
  /** Gateway replicas serving (rate limits while Redis is down); defaults to replicaCountFromConfig. */
  replicas?: ReplicaCount;
}

/** GATEWAY_PEERS_DNS's address count when it is set (GATEWAY_REPLICAS until it answers), else GATEWAY_REPLICAS. */
export function replicaCountFromConfig(config: GatewayConfig, logger?: Logger): ReplicaCount {
  if (!config.GATEWAY_PEERS_DNS) return staticReplicaCount(config.GATEWAY_REPLICAS);
  return dnsReplicaCount({
    name: config.GATEWAY_PEERS_DNS,
    server: config.GATEWAY_PEERS_DNS_SERVER,
    fallback: config.GATEWAY_REPLICAS,
    logger,
  });
}

interface GatewayLocals extends Partial<AuthLocals> {
  route?: RouteEntry;
}

type RawBodyRequest = Request & { rawBody?: Buffer };

export function upstreamsFromConfig(config: GatewayConfig): UpstreamUrls {
  return {
    sessions: config.SESSIONS_URL,
    billing: config.BILLING_URL,
    accounts: config.ACCOUNTS_URL,
    "auth-proxy": config.AUTH_PROXY_URL,
  };
}

/** The keep-alive pool for upstream calls under this config; whoever creates it closes it on shutdown. */
export function createGatewayUpstreamPool(config: GatewayConfig): Dispatcher {
  return createUpstreamPool({
    maxSockets: config.UPSTREAM_MAX_SOCKETS,
    connectTimeoutMs: config.UPSTREAM_CONNECT_TIMEOUT_MS,
  });
}

const AUTH_METHOD_HEADER = HEADERS.authMethod;

/** Whether the operation (or its path) declares parameters or a request body. */
function declaresInputs(doc: OpenApiDocument, route: RouteEntry): boolean {
  const item = doc.paths[route.path];
  const op = item?.[route.method.toLowerCase() as HttpMethod];
  return Boolean(item?.parameters?.length || op?.parameters?.length || op?.requestBody);
}

const routeOf = (res: Response): RouteEntry => {
  const route = (res.locals as GatewayLocals).route;
  if (!route) throw new Error("route not resolved");
  return route;
};

/**
 * The one origin: serves /openapi.json and GET /api/v1/health, and for every other documented
 * /api/v1 operation resolves the route, authenticates, rate-limits, validates against openapi.json
 * and forwards to the owning service. Everything outside /api/ (the portal, probes, metadata) is an Express
 * app; /api/ requests run one fixed handler chain with the same handlers (handlerChain, from shared). Never listens.
 */
export function createApp(deps: GatewayDeps): http.RequestListener {
  const { config, logger, verifier } = deps;
  const doc = deps.openapi ?? loadOpenApiDocument();
  const table = buildRouteTable(doc, upstreamsFromConfig(config));
  const limiters = createRateLimiters(
    {
      windowMs: config.RATE_LIMIT_WINDOW_MS,
      read: config.RATE_LIMIT_READ,
      write: config.RATE_LIMIT_WRITE,
      poll: config.RATE_LIMIT_POLL,
      webhook: config.RATE_LIMIT_WEBHOOK,
      resetEmail: config.RATE_LIMIT_RESET_EMAIL,
      resetEmailWindowMs: config.RATE_LIMIT_RESET_EMAIL_WINDOW_MS,
      replicas: deps.replicas ?? replicaCountFromConfig(config, logger),
      redisTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
    },
    deps.redis,
    logger,
  );
  const forward = createUpstreamProxy({
    agent: deps.upstreamPool ?? createGatewayUpstreamPool(config),
    responseTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    logger,
  });

  // Readiness does not depend on Redis: without it the limiters fall back to per-replica counters.
  const readiness: ReadinessCheck[] = [];
  // The load balancer adds X-Forwarded-For; its own health checks and the kubelet's probes come direct.
  const hideReadinessFromPublic: RequestHandler = (req, _res, next) =>
    next(
      req.path === "/readyz" && req.headers["x-forwarded-for"] !== undefined
        ? AppError.notFound("Route not found")
        : undefined,
    );

  const metricsRoute = (_req: Request, res: Response) => (res.locals as GatewayLocals).route?.path;
  const app = createBaseApp({
    logger,
    readiness,
    jsonLimit: false,
    trustProxy: config.TRUST_PROXY,
    metricsRoute,
    beforeProbes: hideReadinessFromPublic,
  });
  const withSecurityHeaders = securityHeaders(config.PUBLIC_BASE_URL);
  app.use(withSecurityHeaders);

  const cookieSecret = portalCookieSecret(config);
  const oidc =
    deps.oidc ?? createOidcClient({ issuer: config.OIDC_ISSUER, clientId: config.PORTAL_OIDC_CLIENT_ID });
  const browserSessions = createBrowserSessions({
    publicBaseUrl: config.PUBLIC_BASE_URL,
    sessionCookieName: config.SESSION_COOKIE_NAME,
    cookieSecret,
    oidc,
    verifier,
    logger,
    coordinator: deps.redis
      ? createRedisRefreshCoordinator({
          redis: deps.redis,
          secret: cookieSecret,
          logger,
          commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
        })
      : undefined,
  });
  app.use(
    portalRoutes({
      publicBaseUrl: config.PUBLIC_BASE_URL,
      sessionCookieName: config.SESSION_COOKIE_NAME,
      cookieSecret,
      oidc,
      verifier,
      sessions: browserSessions,
      logger,
      limit: limiters.forBucket({ bucket: "read", scope: "ip" }),
      openapi: doc,
    }),
  );

  if (config.LOCAL_CHECKOUT) {
    // Development only (the config refuses it in production): billing's stand-in for Stripe's hosted page, on
    // the one origin and under the pages' CSP, like the rest of the player's journey.
    app.use("/local-checkout", limiters.forBucket({ bucket: "read", scope: "ip" }), (req, res, next) =>
      forward(req, res, next, { upstream: config.BILLING_URL, owner: "billing", body: "stream" }),
    );
  }

  const documentJson = JSON.stringify(doc);
  app.get("/openapi.json", limiters.forBucket({ bucket: "read", scope: "ip" }), (_req, res) => {
    res.type("application/json").send(documentJson);
  });
  app.use(
    protectedResourceMetadata({
      publicBaseUrl: config.PUBLIC_BASE_URL,
      issuer: config.OIDC_ISSUER,
      limit: limiters.forBucket({ bucket: "read", scope: "ip" }),
    }),
  );

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
      res.json({ status: "ok", version: config.APP_VERSION });
      return;
    }
    next(AppError.notFound("Route not found"));
  };

  // Bearer header, or the session cookie (writes only from PUBLIC_BASE_URL's origin); a browser whose
  // access cookie is missing or expired is refreshed from its refresh cookie under the same origin rule.
  // Failed attempts count against the client IP's bucket so credential guessing is limited too.
  const authenticate: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    if (route.public) {
      next();
      return;
    }
    const credential = extractToken(req, {
      cookieName: config.SESSION_COOKIE_NAME,
      allowedOrigin: config.PUBLIC_BASE_URL,
    });
    // A token verified earlier (the usual case) is answered here, without a promise.
    const known = credential && verifier.cached(credential.token);
    if (known) {
      const locals = res.locals as GatewayLocals;
      locals.principal = known;
      locals.accessToken = credential.token;
      locals.credentialSource = credential.source;
      next();
      return;
    }
    return verifyOrRefresh(req, res, next, route, credential);
  };

  const verifyOrRefresh = async (
    req: Request,
    res: Response,
    next: NextFunction,
    route: RouteEntry,
    credential: ReturnType<typeof extractToken>,
  ): Promise<void> => {
    const locals = res.locals as GatewayLocals;
    try {
      if (credential) {
        // A bearer that fails is final; a failing access cookie falls through to the refresh cookie.
        const principal = await verifier.verify(credential.token).catch((err: unknown) => {
          if (credential.source !== "cookie" || isIdentityOutage(err)) throw err;
          return null;
        });
        if (principal) {
          locals.principal = principal;
          locals.accessToken = credential.token;
          locals.credentialSource = credential.source;
          next();
          return;
        }
      }
      const refreshed = await browserSessions.refresh(req);
      if (refreshed.kind === "unavailable") {
        next(AppError.unavailable("The identity provider is unavailable; try again shortly", 5));
        return;
      }
      if (refreshed.kind === "signed-out") res.append("Set-Cookie", refreshed.setCookies);
      if (refreshed.kind !== "refreshed") throw AppError.unauthenticated();
      res.append("Set-Cookie", refreshed.setCookies);
      locals.principal = refreshed.principal;
      locals.accessToken = refreshed.accessToken;
      locals.credentialSource = "cookie";
      next();
    } catch (err) {
      if (isIdentityOutage(err)) {
        next(err);
        return;
      }
      if (!route.rateLimit) {
        next(AppError.unauthenticated());
        return;
      }
      const ipLimiter = limiters.forBucket({ bucket: route.rateLimit.bucket, scope: "ip" });
      void ipLimiter(req, res, (err?: unknown) => next(err ?? AppError.unauthenticated()));
    }
  };

  const limit: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    if (!route.rateLimit) {
      next();
      return;
    }
    void limiters.forBucket(route.rateLimit)(req, res, next);
  };

  const jsonParser = express.json({
    limit: config.BODY_LIMIT,
    type: ["application/json", "application/*+json"],
    verify: (req, _res, buf) => {
      (req as RawBodyRequest).rawBody = buf;
    },
  });
  const parseBody: RequestHandler = (req, res, next) =>
    routeOf(res).rawBody ? next() : jsonParser(req, res, next);

  const validator = express.Router();
  validator.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(doc) as never,
      validateRequests: { allowUnknownQueryParameters: false },
      validateResponses: false,
      validateSecurity: false,
      validateApiSpec: false,
      ignoreUndocumented: true,
    }),
  );
  // An operation without parameters or body has nothing to check in a request without query or body; the
  // validator's own pass over it was a measurable share of each poll's CPU.
  // The table's own entries (match returns them), so the check makes no key per request.
  const withoutInputs = new Set(table.routes.filter((r) => !declaresInputs(doc, r)));
  const nothingToValidate = (req: Request, route: RouteEntry): boolean =>
    withoutInputs.has(route) &&
    !req.url.includes("?") &&
    (req.headers["content-length"] === undefined || req.headers["content-length"] === "0") &&
    req.headers["transfer-encoding"] === undefined;
  // Raw-body routes (the Stripe webhook) are not validated here: their service checks the signature over the untouched bytes.
  const validate: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    if (route.rawBody || nothingToValidate(req, route)) next();
    else validator(req, res, next);
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

  installErrorHandlers(app, { logger });
  const api = handlerChain(
    app,
    [
      ...frontHandlers({ logger, metricsRoute }),
      apiSecurityHeaders(config.PUBLIC_BASE_URL),
      resolveRoute,
      gatewayOwned,
      authenticate,
      limit,
      parseBody,
      validate,
      perEmail,
      proxy,
    ],
    [bearerChallenge(config.PUBLIC_BASE_URL), errorHandler({ logger })],
  );
  return withServerSpans((req, res) => ((req.url ?? "").startsWith("/api/") ? api(req, res) : app(req, res)));
}
