import {
  createKeycloakAdmin,
  createOutboxPublisher,
  keycloakAdminOptions,
  startEventWorkers,
  startPeriodicWorker,
  systemClock,
  type Clock,
  type Closer,
  type ComposedService,
  type IdentityAdmin,
} from "@cgs/shared";
import { createApp, type AccountsContext } from "./app";
import type { AccountsConfig } from "./config";
import { AccountRepository } from "./data/account-repository";
import { createAccountUseCases } from "./domain/account-use-cases";
import { createDeletionSweep } from "./domain/deletion-sweep";

/** Outside systems, chosen from config; tests pass their own. */
export interface AccountsAdapters {
  identity: IdentityAdmin;
  clock: Clock;
}

/** What the domain needs from config, and nothing else. */
export interface AccountsSettings {
  deletionGraceDays: number;
  sweepBatchSize: number;
  sweepIntervalMs: number;
  queuePrefix: string;
}

export function accountsSettings(config: AccountsConfig): AccountsSettings {
  return {
    deletionGraceDays: config.ACCOUNT_DELETION_GRACE_DAYS,
    sweepBatchSize: config.DELETION_SWEEP_BATCH_SIZE,
    sweepIntervalMs: config.DELETION_SWEEP_INTERVAL_MS,
    queuePrefix: config.QUEUE_NAME_PREFIX,
  };
}

export function accountsAdapters(
  config: AccountsConfig,
  overrides: Partial<AccountsAdapters> = {},
): AccountsAdapters {
  return {
    identity: overrides.identity ?? createKeycloakAdmin(keycloakAdminOptions(config)),
    clock: overrides.clock ?? systemClock,
  };
}

/** The app and the deletion sweep over one repository, one set of adapters and one settings object. */
export function buildAccounts(context: AccountsContext, overrides: Partial<AccountsAdapters> = {}) {
  const { config, logger, verifier, database } = context;
  const adapters = accountsAdapters(config, overrides);
  const settings = accountsSettings(config);
  const accounts = new AccountRepository(database.db);
  const useCases = createAccountUseCases({
    accounts,
    clock: adapters.clock,
    deletionGraceDays: settings.deletionGraceDays,
  });
  const sweep = createDeletionSweep({
    database,
    accounts,
    identity: adapters.identity,
    clock: adapters.clock,
    events: createOutboxPublisher(settings.queuePrefix),
    logger: logger.child({ component: "deletion-sweep" }),
    batchSize: settings.sweepBatchSize,
  });
  return {
    app: createApp({ logger, verifier, database, useCases }),
    sweep,
    /** Outbox relay (account.purge to sessions and billing) and the periodic deletion sweep. */
    async startWorkers(): Promise<Closer[]> {
      const events = await startEventWorkers({ config, db: database.db, logger });
      const worker = startPeriodicWorker(
        "deletion-sweep",
        settings.sweepIntervalMs,
        () => sweep.runOnce(),
        logger.child({ component: "deletion-sweep" }),
      );
      return [() => worker.stop(), ...events.closers];
    },
  };
}

/** The composition root runService calls. */
export function composeAccounts(
  context: AccountsContext,
  overrides: Partial<AccountsAdapters> = {},
): ComposedService {
  const accounts = buildAccounts(context, overrides);
  return { app: accounts.app, workers: accounts.startWorkers };
}
