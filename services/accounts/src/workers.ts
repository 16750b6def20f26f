import {
  createKeycloakAdmin,
  keycloakAdminOptions,
  startEventWorkers,
  startPeriodicWorker,
  type Closer,
  type IdentityAdmin,
} from "@cgs/shared";
import type { AccountsContext } from "./app";
import { AccountRepository } from "./data/account-repository";
import { systemClock, type Clock } from "@cgs/shared";
import { createDeletionSweep } from "./domain/deletion-sweep";

/** Outbox relay (account.purge to sessions and billing) and the deletion sweep. */
export async function startWorkers(
  context: AccountsContext,
  overrides: { clock?: Clock; identity?: IdentityAdmin } = {},
): Promise<Closer[]> {
  const { config, logger, database } = context;
  const events = await startEventWorkers({ config, db: database.db, logger });
  const sweep = createDeletionSweep({
    database,
    accounts: new AccountRepository(database.db),
    identity: overrides.identity ?? createKeycloakAdmin(keycloakAdminOptions(config)),
    clock: overrides.clock ?? systemClock,
    logger: logger.child({ component: "deletion-sweep" }),
    batchSize: config.DELETION_SWEEP_BATCH_SIZE,
    queuePrefix: config.QUEUE_NAME_PREFIX,
  });
  const worker = startPeriodicWorker(
    "deletion-sweep",
    config.DELETION_SWEEP_INTERVAL_MS,
    () => sweep.runOnce(),
    logger.child({ component: "deletion-sweep" }),
  );
  return [() => worker.stop(), ...events.closers];
}
