import type { Clock, ComponentLogger, OutboxPublisher } from "@cgs/shared";
import type { BillingConfig } from "../config";
import type { BillingDatabase } from "../data/wallet-repository";
import type { StorageTierName, StorageTiers } from "./storage-tiers";

/** The business rules taken from config, in the units the use cases work in. */
export interface BillingSettings {
  currency: string;
  ratePerMinute: number;
  holdMinutes: number;
  holdTtlMs: number;
  minuteMs: number;
  /** Fewer paid minutes left than this: sessions is told when the credit runs out (credits.low). */
  lowCreditWarningMinutes: number;
  meteringBatchSize: number;
  topupMin: number;
  topupMax: number;
  storageTiers: StorageTiers;
  defaultStorageTier: StorageTierName;
}

export function billingSettings(config: BillingConfig): BillingSettings {
  return {
    currency: config.WALLET_CURRENCY,
    ratePerMinute: config.SESSION_RATE_PER_MINUTE,
    holdMinutes: config.START_HOLD_MINUTES,
    holdTtlMs: config.HOLD_TTL_MS,
    minuteMs: config.METERING_MINUTE_MS,
    lowCreditWarningMinutes: config.LOW_CREDIT_WARNING_MINUTES,
    meteringBatchSize: config.METERING_BATCH_SIZE,
    topupMin: config.TOPUP_MIN_AMOUNT,
    topupMax: config.TOPUP_MAX_AMOUNT,
    storageTiers: config.storageTiers,
    defaultStorageTier: config.STORAGE_DEFAULT_TIER,
  };
}

/** What every use case needs: the database, the rules, the event publisher (queue prefix bound), a logger and a clock. */
export interface BillingDeps {
  db: BillingDatabase;
  settings: BillingSettings;
  publisher: OutboxPublisher;
  logger: ComponentLogger;
  clock: Clock;
}
