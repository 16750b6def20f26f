import type { Express } from "express";
import { createServiceApp, type IdentityAdmin, type ServiceContext } from "@cgs/shared";
import type { AuthProxyConfig } from "./config";
import type { ResetRepository } from "./data/reset-repository";
import type * as schema from "./data/schema";
import { systemClock, type Clock } from "@cgs/shared";
import { createCompleteReset, parseResetRequest } from "./domain/password-reset";
import type { ResetTokenCodec } from "./domain/reset-token";
import { passwordResetRoutes } from "./http/password-reset-routes";

export type AuthProxyContext = ServiceContext<AuthProxyConfig, typeof schema>;

export interface AuthProxyAppDeps extends Pick<AuthProxyContext, "logger" | "verifier" | "database"> {
  resets: ResetRepository;
  identity: IdentityAdmin;
  tokens: ResetTokenCodec;
  /** Called after a reset request is queued, so the worker picks it up at once. */
  onResetRequested?: () => void;
  clock?: Clock;
}

/**
 * Password reset (public): the request endpoint only queues the address, so it answers the same bytes in
 * the same time whether or not an account exists; the worker looks it up and mails. Complete sets the
 * password through the identity provider's admin API.
 */
export function createApp(deps: AuthProxyAppDeps): Express {
  const { logger, verifier, database, resets, identity, tokens, clock = systemClock } = deps;
  const completeReset = createCompleteReset({ database, resets, identity, tokens, clock, logger });
  return createServiceApp({
    logger,
    verifier,
    database,
    jsonLimit: "16kb",
    publicRoutes: (router) => {
      router.use(
        passwordResetRoutes({
          async request(body) {
            const { email } = parseResetRequest(body);
            await resets.enqueueRequest(email);
            deps.onResetRequested?.();
          },
          complete: completeReset,
        }),
      );
    },
  });
}
