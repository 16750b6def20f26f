import http from "node:http";
import type { Dispatcher } from "undici";
import type { RequestHandler } from "express";
import type { Logger } from "pino";
import {
  AppError,
  createBaseApp,
  installErrorHandlers,
  loadOpenApiDocument,
  type JwtVerifier,
  type OpenApiDocument,
} from "@cgs/shared";
import type { GatewayConfig } from "./config";
import { apiReferenceRoutes } from "./docs/api-reference-routes";
import { createApiChain } from "./http/api-chain";
import { createAuthentication } from "./http/authentication-middleware";
import { matchedRoutePath } from "./http/gateway-locals";
import { protectedResourceMetadata } from "./http/protected-resource-metadata";
import { createRateLimiters, type RedisCommandSender } from "./http/rate-limit-middleware";
import { dnsReplicaCount, staticReplicaCount, type ReplicaCount } from "./http/replica-count";
import { createRequestValidation } from "./http/request-validation-middleware";
import { buildRouteTable, type UpstreamUrls } from "./http/route-table";
import { securityHeaders } from "./http/security-headers";
import { withServerSpans } from "./http/server-span";
import { createUpstreamPool, createUpstreamProxy } from "./http/upstream-proxy";
import type { OidcClient } from "./portal/oidc-login";
import { createPortal } from "./portal/portal-composition";

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

/**
 * The one origin, wired from its parts: /api/ requests go to the API chain (http/api-chain.ts: route lookup,
 * authentication, rate limits, validation, forwarding); everything else (probes, the portal, /openapi.json, the
 * API reference at /docs/api, the RFC 9728 metadata) to an Express app under the pages' security headers. Both
 * share the rate limiters and the upstream pool. Never listens.
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
  const readPerIp = limiters.forBucket({ bucket: "read", scope: "ip" });
  const forward = createUpstreamProxy({
    agent: deps.upstreamPool ?? createGatewayUpstreamPool(config),
    responseTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    logger,
  });

  // The load balancer adds X-Forwarded-For; its own health checks and the kubelet's probes come direct.
  const hideReadinessFromPublic: RequestHandler = (req, _res, next) =>
    next(
      req.path === "/readyz" && req.headers["x-forwarded-for"] !== undefined
        ? AppError.notFound("Route not found")
        : undefined,
    );
  const app = createBaseApp({
    logger,
    // Readiness does not depend on Redis: without it the limiters fall back to per-replica counters.
    readiness: [],
    jsonLimit: false,
    trustProxy: config.TRUST_PROXY,
    metricsRoute: matchedRoutePath,
    beforeProbes: hideReadinessFromPublic,
  });
  app.use(securityHeaders(config.PUBLIC_BASE_URL));
  app.use(apiReferenceRoutes({ logger, limit: readPerIp }));
  const portal = createPortal({
    config,
    logger,
    verifier,
    openapi: doc,
    oidc: deps.oidc,
    redis: deps.redis,
    limit: readPerIp,
    forward,
  });
  app.use(portal.routes);
  const documentJson = JSON.stringify(doc);
  app.get("/openapi.json", readPerIp, (_req, res) => {
    res.type("application/json").send(documentJson);
  });
  app.use(
    protectedResourceMetadata({
      publicBaseUrl: config.PUBLIC_BASE_URL,
      issuer: config.OIDC_ISSUER,
      limit: readPerIp,
    }),
  );
  installErrorHandlers(app, { logger });

  const api = createApiChain({
    app,
    logger,
    table,
    limiters,
    forward,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    appVersion: config.APP_VERSION,
    authenticate: createAuthentication({
      verifier,
      sessionCookieName: config.SESSION_COOKIE_NAME,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      browserSessions: portal.browserSessions,
      limiters,
    }),
    validation: createRequestValidation({ openapi: doc, table, bodyLimit: config.BODY_LIMIT }),
  });
  return withServerSpans((req, res) => ((req.url ?? "").startsWith("/api/") ? api(req, res) : app(req, res)));
}
