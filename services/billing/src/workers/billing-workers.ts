import { metrics, onScrape, startPeriodicWorker, type Closer, type startEventWorkers } from "@cgs/shared";
import type { BillingContext } from "../app";
import { meteringLagSeconds } from "../data/metering-lag-repository";
import type { BillingDeps } from "../domain/billing-deps";
import { meterRunningSessions, releaseExpiredHolds } from "../domain/metering";
import { auditRunningSessions } from "../domain/metering-audit";
import { chargeStoragePeriods } from "../domain/storage-billing";
import { billingEventHandlers } from "./billing-event-handlers";

/**
 * Background work of one billing process: the outbox relay and the consumer of session and purge events,
 * the metering loop (every replica runs it; SKIP LOCKED splits the work), the metering audit against
 * sessions and the storage-period pass.
 */
export async function startBillingWorkers(
  context: BillingContext,
  deps: BillingDeps,
  startEvents: typeof startEventWorkers,
): Promise<Closer[]> {
  const { config, logger, database } = context;
  const events = await startEvents({
    config,
    db: database.db,
    logger,
    handlers: billingEventHandlers(deps),
  });
  const metering = startPeriodicWorker(
    "metering",
    config.METERING_INTERVAL_MS,
    async () => {
      await meterRunningSessions(deps);
      await releaseExpiredHolds(deps);
    },
    logger.child({ component: "metering" }),
  );
  const audit = startPeriodicWorker(
    "metering-audit",
    config.METERING_AUDIT_INTERVAL_MS,
    () => auditRunningSessions(deps),
    logger.child({ component: "metering-audit" }),
  );
  const storage = startPeriodicWorker(
    "storage-billing",
    config.STORAGE_BILLING_INTERVAL_MS,
    () => chargeStoragePeriods(deps),
    logger.child({ component: "storage-billing" }),
  );
  const stopLagGauge = onScrape(async () =>
    metrics.meteringLag.set(await meteringLagSeconds(database.db, deps.now())),
  );
  // Timers first, so no pass starts against a closing database; then the consumer and relay.
  return [() => metering.stop(), () => audit.stop(), () => storage.stop(), stopLagGauge, ...events.closers];
}
