import type { Express } from "express";
import { createBaseApp, installErrorHandlers, requireAuth, type ServiceContext } from "@cgs/shared";
import type { AccountsConfig } from "./config";
import { AccountRepository } from "./data/account-repository";
import type * as schema from "./data/schema";
import { createAccountUseCases } from "./domain/account-use-cases";
import { systemClock, type Clock } from "@cgs/shared";
import { accountRoutes, internalAccountRoutes } from "./http/account-routes";

export type AccountsContext = ServiceContext<AccountsConfig, typeof schema>;

export interface AccountsAppDeps extends AccountsContext {
  clock?: Clock;
}

/**
 * The accounts service: preferences, identity view and deletion requests under /api/v1, and the
 * account view sessions and billing read under /internal/v1. Every route verifies the caller's JWT.
 */
export function createApp({
  config,
  logger,
  verifier,
  database,
  clock = systemClock,
}: AccountsAppDeps): Express {
  const useCases = createAccountUseCases({
    accounts: new AccountRepository(database.db),
    clock,
    deletionGraceDays: config.ACCOUNT_DELETION_GRACE_DAYS,
  });
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
