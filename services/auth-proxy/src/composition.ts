import {
  createKeycloakAdmin,
  keycloakAdminOptions,
  startPeriodicWorker,
  systemClock,
  type Clock,
  type Closer,
  type ComposedService,
  type IdentityAdmin,
  type PeriodicWorker,
} from "@cgs/shared";
import { createSmtpMailer, type Mailer } from "./adapters/smtp-mailer";
import { createApp, type AuthProxyContext } from "./app";
import type { AuthProxyConfig } from "./config";
import { LOCAL_RESET_TOKEN_SECRET } from "./config";
import { ResetRepository } from "./data/reset-repository";
import { createResetRequestProcessor } from "./domain/password-reset";
import { createResetTokenCodec, type ResetTokenCodec } from "./domain/reset-token";

const TOKEN_CLEANUP_INTERVAL_MS = 60_000;

/** Outside systems (identity provider, mail) and the token codec, chosen from config; tests pass their own. */
export interface AuthProxyAdapters {
  identity: IdentityAdmin;
  tokens: ResetTokenCodec;
  mailer: Mailer;
  clock: Clock;
}

/** What the reset worker needs from config, and nothing else. */
export interface AuthProxySettings {
  publicBaseUrl: string;
  ttlSeconds: number;
  maxAttempts: number;
  workerIntervalMs: number;
}

export function authProxySettings(config: AuthProxyConfig): AuthProxySettings {
  return {
    publicBaseUrl: config.PUBLIC_BASE_URL,
    ttlSeconds: config.RESET_TOKEN_TTL_SECONDS,
    maxAttempts: config.RESET_WORKER_MAX_ATTEMPTS,
    workerIntervalMs: config.RESET_WORKER_INTERVAL_MS,
  };
}

export function adaptersFromConfig(config: AuthProxyConfig): AuthProxyAdapters {
  return {
    identity: createKeycloakAdmin(keycloakAdminOptions(config)),
    tokens: createResetTokenCodec(
      config.RESET_TOKEN_SECRET ?? LOCAL_RESET_TOKEN_SECRET,
      config.RESET_TOKEN_TTL_SECONDS,
    ),
    mailer: createSmtpMailer({ url: config.SMTP_URL, from: config.MAIL_FROM }),
    clock: systemClock,
  };
}

/**
 * The composition root: one repository and one set of adapters for the app and the reset worker (the
 * app's request handler kicks the worker, once started, so a queued reset is mailed at once).
 */
export function composeAuthProxy(
  context: AuthProxyContext,
  adapters: AuthProxyAdapters = adaptersFromConfig(context.config),
): ComposedService {
  const { logger, verifier, database } = context;
  const settings = authProxySettings(context.config);
  const resets = new ResetRepository(database.db);
  const processor = createResetRequestProcessor({
    resets,
    identity: adapters.identity,
    tokens: adapters.tokens,
    mailer: adapters.mailer,
    clock: adapters.clock,
    logger: logger.child({ component: "reset-worker" }),
    publicBaseUrl: settings.publicBaseUrl,
    ttlSeconds: settings.ttlSeconds,
    maxAttempts: settings.maxAttempts,
  });
  let worker: PeriodicWorker | undefined;
  const app = createApp({
    logger,
    verifier,
    database,
    resets,
    identity: adapters.identity,
    tokens: adapters.tokens,
    clock: adapters.clock,
    onResetRequested: () => worker?.kick(),
  });
  const workers = (): Closer[] => {
    let lastCleanup = 0;
    const started = startPeriodicWorker(
      "reset-worker",
      settings.workerIntervalMs,
      async () => {
        await processor.drain();
        const now = adapters.clock.now();
        if (now.getTime() - lastCleanup < TOKEN_CLEANUP_INTERVAL_MS) return;
        lastCleanup = now.getTime();
        await resets.forgetExpiredTokens(now);
      },
      logger,
    );
    worker = started;
    return [() => started.stop(), () => adapters.mailer.close()];
  };
  return { app, workers };
}
