import { Router, type RequestHandler } from "express";
import type { Logger } from "pino";
import type { JwtVerifier, OpenApiDocument } from "@cgs/shared";
import type { GatewayConfig } from "../config";
import type { RedisCommandSender } from "../http/rate-limit-middleware";
import type { Forwarder } from "../http/upstream-proxy";
import { createOidcClient, type OidcClient } from "./oidc-login";
import { portalCookieSecret } from "./portal-config";
import { portalRoutes } from "./portal-routes";
import { createRedisRefreshCoordinator } from "./refresh-coordinator";
import { createBrowserSessions, type BrowserSessions } from "./session-refresh";

export type PortalConfig = Pick<
  GatewayConfig,
  | "NODE_ENV"
  | "PUBLIC_BASE_URL"
  | "SESSION_COOKIE_NAME"
  | "PORTAL_COOKIE_SECRET"
  | "OIDC_ISSUER"
  | "PORTAL_OIDC_CLIENT_ID"
  | "REDIS_COMMAND_TIMEOUT_MS"
  | "LOCAL_CHECKOUT"
  | "BILLING_URL"
  | "PORTAL_BEACON_ORIGINS"
>;

export interface PortalCompositionOptions {
  config: PortalConfig;
  logger: Logger;
  verifier: JwtVerifier;
  /** The API contract: the settings form and the top-up bounds are built from its schemas. */
  openapi: OpenApiDocument;
  /** The portal's OIDC client; defaults to discovery from OIDC_ISSUER. */
  oidc?: OidcClient;
  /** Shares browser refreshes across replicas; omit for one replica (in-process single flight only). */
  redis?: RedisCommandSender;
  /** Per-IP limiter for the pages that call the identity provider and for the local checkout. */
  limit: RequestHandler;
  /** Forwards the local checkout to billing. */
  forward: Forwarder;
}

export interface Portal {
  /** The pages, their assets, sign-in and logout, and (LOCAL_CHECKOUT) the local checkout: mount before 404s. */
  routes: Router;
  /** The browser's session cookies and their refresh, which the API's authentication uses too. */
  browserSessions: BrowserSessions;
}

/**
 * The player portal on the one origin, built from the gateway's config: the browser sessions (access cookie and
 * encrypted refresh cookie, refreshes shared across replicas through Redis when there is one), the portal's
 * pages (portalRoutes), and, in development only, billing's stand-in for Stripe's hosted checkout.
 */
export function createPortal(options: PortalCompositionOptions): Portal {
  const { config, logger, verifier } = options;
  const cookieSecret = portalCookieSecret(config);
  const oidc =
    options.oidc ?? createOidcClient({ issuer: config.OIDC_ISSUER, clientId: config.PORTAL_OIDC_CLIENT_ID });
  const browserSessions = createBrowserSessions({
    publicBaseUrl: config.PUBLIC_BASE_URL,
    sessionCookieName: config.SESSION_COOKIE_NAME,
    cookieSecret,
    oidc,
    verifier,
    logger,
    coordinator: options.redis
      ? createRedisRefreshCoordinator({
          redis: options.redis,
          secret: cookieSecret,
          logger,
          commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
        })
      : undefined,
  });

  const routes = Router();
  routes.use(
    portalRoutes({
      publicBaseUrl: config.PUBLIC_BASE_URL,
      sessionCookieName: config.SESSION_COOKIE_NAME,
      cookieSecret,
      oidc,
      verifier,
      sessions: browserSessions,
      logger,
      limit: options.limit,
      openapi: options.openapi,
      beaconOrigins: config.PORTAL_BEACON_ORIGINS,
    }),
  );
  if (config.LOCAL_CHECKOUT) {
    // Development only (the config refuses it in production): billing's stand-in for Stripe's hosted page, on
    // the one origin and under the pages' CSP, like the rest of the player's journey.
    routes.use("/local-checkout", options.limit, (req, res, next) =>
      options.forward(req, res, next, { upstream: config.BILLING_URL, owner: "billing", body: "stream" }),
    );
  }
  return { routes, browserSessions };
}
