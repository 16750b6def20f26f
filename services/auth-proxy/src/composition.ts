import {
  createKeycloakAdmin,
  keycloakAdminOptions,
  startPeriodicWorker,
  type Closer,
  type IdentityAdmin,
  type PeriodicWorker,
} from "@cgs/shared";
import type { AuthProxyConfig } from "./config";
import { LOCAL_RESET_TOKEN_SECRET } from "./config";
import { createApp, type AuthProxyContext } from "./app";
import { ResetRepository } from "./data/reset-repository";
import { createSmtpMailer, type Mailer } from "./domain/mailer";
import { systemClock, type Clock } from "@cgs/shared";
import { createResetRequestProcessor } from "./domain/password-reset";
import { createResetTokenCodec, type ResetTokenCodec } from "./domain/reset-token";

const TOKEN_CLEANUP_INTERVAL_MS = 60_000;

export interface AuthProxyAdapters {
  identity: IdentityAdmin;
  tokens: ResetTokenCodec;
  mailer: Mailer;
  clock: Clock;
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
 * Wires the app and the reset worker over one set of adapters (runService calls startWorkers before
 * buildApp; the app's request handler kicks the worker).
 */
export function createAuthProxy(adapters: AuthProxyAdapters) {
  let worker: PeriodicWorker | undefined;
  return {
    startWorkers(context: AuthProxyContext): Closer[] {
      const resets = new ResetRepository(context.database.db);
      let lastCleanup = 0;
      const processor = createResetRequestProcessor({
        resets,
        identity: adapters.identity,
        tokens: adapters.tokens,
        mailer: adapters.mailer,
        clock: adapters.clock,
        logger: context.logger.child({ component: "reset-worker" }),
        publicBaseUrl: context.config.PUBLIC_BASE_URL,
        ttlSeconds: context.config.RESET_TOKEN_TTL_SECONDS,
        maxAttempts: context.config.RESET_WORKER_MAX_ATTEMPTS,
      });
      const started = startPeriodicWorker(
        "reset-worker",
        context.config.RESET_WORKER_INTERVAL_MS,
        async () => {
          await processor.drain();
          const now = adapters.clock.now();
          if (now.getTime() - lastCleanup < TOKEN_CLEANUP_INTERVAL_MS) return;
          lastCleanup = now.getTime();
          await resets.forgetExpiredTokens(now);
        },
        context.logger,
      );
      worker = started;
      return [() => started.stop(), () => adapters.mailer.close()];
    },
    buildApp(context: AuthProxyContext) {
      return createApp({
        ...context,
        identity: adapters.identity,
        tokens: adapters.tokens,
        clock: adapters.clock,
        onResetRequested: () => worker?.kick(),
      });
    },
  };
}
