import type Stripe from "stripe";
import {
  createAccountsClient,
  createOutboxPublisher,
  metrics,
  onScrape,
  startEventWorkers,
  startPeriodicWorker,
  systemClock,
  type AccountsClient,
  type Clock,
  type Closer,
  type ComposedService,
} from "@cgs/shared";
import { createLocalPaymentProvider } from "./adapters/local-payment-provider";
import { createLocalWebhookSender } from "./adapters/local-webhook-sender";
import type { PaymentProvider } from "./adapters/payment-provider";
import { createStripeClient } from "./adapters/stripe-client";
import { createStripePaymentProvider } from "./adapters/stripe-payment-provider";
import { createApp, type BillingContext } from "./app";
import type { BillingConfig } from "./config";
import { meteringLagSeconds } from "./data/metering-lag-repository";
import { settleSilentRecharges, submitRecharges, type AutoRechargeDeps } from "./domain/auto-recharge";
import { finishPendingRefunds } from "./domain/stripe-events";
import { billingSettings, type BillingDeps } from "./domain/billing-deps";
import { meterRunningSessions, releaseExpiredHolds } from "./domain/metering";
import { auditRunningSessions } from "./domain/metering-audit";
import { detachRetiredCards } from "./domain/saved-cards";
import { chargeStoragePeriods } from "./domain/storage-billing";
import { billingEventHandlers } from "./events/billing-event-handlers";

/** Outside systems, chosen from config at the composition root; tests may pass their own. */
export interface BillingAdapters {
  stripe: Stripe;
  payments: PaymentProvider;
  accounts: AccountsClient;
  clock: Clock;
}

export function billingAdapters(
  config: BillingConfig,
  overrides: Partial<BillingAdapters> = {},
): BillingAdapters {
  const stripe =
    overrides.stripe ??
    createStripeClient({
      secretKey: config.STRIPE_SECRET_KEY,
      apiBase: config.STRIPE_API_BASE,
      timeoutMs: config.STRIPE_TIMEOUT_MS,
    });
  return {
    stripe,
    payments:
      overrides.payments ??
      (config.PAYMENT_PROVIDER === "local"
        ? createLocalPaymentProvider(
            config.LOCAL_CHECKOUT_BASE_URL,
            createLocalWebhookSender({
              stripe,
              webhookSecret: config.STRIPE_WEBHOOK_SECRET,
              webhookUrl: config.LOCAL_CHECKOUT_WEBHOOK_URL,
            }),
          )
        : createStripePaymentProvider(stripe)),
    accounts:
      overrides.accounts ??
      createAccountsClient({ baseUrl: config.ACCOUNTS_URL, timeoutMs: config.ACCOUNTS_TIMEOUT_MS }),
    clock: overrides.clock ?? systemClock,
  };
}

export function billingDeps(context: BillingContext, clock: Clock): BillingDeps {
  return {
    db: context.database.db,
    settings: billingSettings(context.config),
    publisher: createOutboxPublisher(context.config.QUEUE_NAME_PREFIX),
    logger: context.logger,
    clock,
  };
}

/**
 * The composition root: adapters, settings and the use cases' dependencies are built once here and shared by
 * the HTTP app and the background workers (one clock, one Stripe client, one accounts client per process).
 */
export function composeBilling(
  context: BillingContext,
  overrides: Partial<BillingAdapters> = {},
): ComposedService & { deps: BillingDeps } {
  const adapters = billingAdapters(context.config, overrides);
  const deps = billingDeps(context, adapters.clock);
  return {
    app: createApp(context, adapters, deps),
    deps,
    workers: () => startBillingWorkers(context, { ...deps, payments: adapters.payments }),
  };
}

/**
 * Background work of one billing process: the outbox relay and the consumer of session and purge events,
 * the metering loop (every replica runs it; SKIP LOCKED splits the work), the metering audit against
 * sessions, the storage-period pass, and the auto-recharge pass (Stripe calls for recorded recharges, detaching
 * removed cards).
 */
async function startBillingWorkers(
  context: BillingContext,
  deps: AutoRechargeDeps & { payments: PaymentProvider },
): Promise<Closer[]> {
  const { config, logger, database } = context;
  const events = await startEventWorkers({
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
  const recharges = startPeriodicWorker(
    "auto-recharge",
    config.AUTO_RECHARGE_INTERVAL_MS,
    async () => {
      await submitRecharges(deps);
      // Recharges whose outcome never came by webhook: failed ones free the wallet's in-flight slot.
      await settleSilentRecharges(deps);
      await detachRetiredCards(deps);
      // Calls to Stripe that must be finished: closed wallets' refunds whose event Stripe stopped redelivering.
      await finishPendingRefunds(deps, deps.payments);
    },
    logger.child({ component: "auto-recharge" }),
  );
  const stopLagGauge = onScrape(async () =>
    metrics.meteringLag.set(await meteringLagSeconds(database.db, deps.clock.now())),
  );
  // Timers first, so no pass starts against a closing database; then the consumer and relay.
  return [
    () => metering.stop(),
    () => audit.stop(),
    () => storage.stop(),
    () => recharges.stop(),
    stopLagGauge,
    ...events.closers,
  ];
}
