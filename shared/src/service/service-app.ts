import { Router, type Express } from "express";
import type { Logger } from "pino";
import { requireAuth, type JwtVerifier } from "../auth";
import { createBaseApp, installErrorHandlers, type ReadinessCheck } from "../http";
import { rememberRouteBase } from "../metrics/metrics-middleware";

export interface ServiceAppOptions {
  logger: Logger;
  verifier: JwtVerifier;
  database: { ping(): Promise<void> };
  readiness?: ReadinessCheck[];
  /** JSON body limit; false when a route must read the raw body (the Stripe webhook). */
  jsonLimit?: string | number | false;
  /** Routes under /api/v1 reachable without a token (password reset, signed webhooks). */
  publicRoutes?: (router: Router) => void;
  /** Routes under /api/v1 behind the service's own JWT check: no service trusts an identity header. */
  routes?: (router: Router) => void;
}

/** A service's Express app: /healthz, /readyz (database and any extra checks), public then authenticated routes. */
export function createServiceApp(options: ServiceAppOptions): Express {
  const app = createBaseApp({
    logger: options.logger,
    jsonLimit: options.jsonLimit,
    readiness: [{ name: "db", check: () => options.database.ping() }, ...(options.readiness ?? [])],
  });
  const publicApi = Router();
  publicApi.use(rememberRouteBase);
  options.publicRoutes?.(publicApi);
  app.use("/api/v1", publicApi);
  const api = Router();
  api.use(rememberRouteBase, requireAuth(options.verifier));
  options.routes?.(api);
  app.use("/api/v1", api);
  installErrorHandlers(app, { logger: options.logger });
  return app;
}
