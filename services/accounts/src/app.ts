import type { Express } from "express";
import { createBaseApp, installErrorHandlers, requireAuth, type ServiceContext } from "@cgs/shared";
import type { AccountsConfig } from "./config";
import type * as schema from "./data/schema";
import type { AccountUseCases } from "./domain/account-use-cases";
import { accountRoutes, internalAccountRoutes } from "./http/account-routes";

export type AccountsContext = ServiceContext<AccountsConfig, typeof schema>;

export interface AccountsAppDeps extends Pick<AccountsContext, "logger" | "verifier" | "database"> {
  useCases: AccountUseCases;
}

/**
 * The accounts service: preferences, identity view and deletion requests under /api/v1, and the
 * account view sessions and billing read under /internal/v1. Every route verifies the caller's JWT.
 */
export function createApp({ logger, verifier, database, useCases }: AccountsAppDeps): Express {
  const app = createBaseApp({
    logger,
    readiness: [{ name: "db", check: () => database.ping() }],
  });
  const auth = requireAuth(verifier);
  app.use("/api/v1", auth, accountRoutes(useCases));
  app.use("/internal/v1", auth, internalAccountRoutes(useCases));
  installErrorHandlers(app, { logger });
  return app;
}
