import type { ComponentLogger } from "@cgs/shared";
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
  meteringBatchSize: number;
  topupMin: number;
  topupMax: number;
  storageTiers: StorageTiers;
  defaultStorageTier: StorageTierName;
  /** Prefix of every queue events are published to (tests isolate themselves with it). */
  queuePrefix: string;
}

export function billingSettings(config: BillingConfig): BillingSettings {
  return {
    currency: config.WALLET_CURRENCY,
    ratePerMinute: config.SESSION_RATE_PER_MINUTE,
    holdMinutes: config.START_HOLD_MINUTES,
    holdTtlMs: config.HOLD_TTL_MS,
    minuteMs: config.METERING_MINUTE_MS,
    meteringBatchSize: config.METERING_BATCH_SIZE,
    topupMin: config.TOPUP_MIN_AMOUNT,
    topupMax: config.TOPUP_MAX_AMOUNT,
    storageTiers: config.storageTiers,
    defaultStorageTier: config.STORAGE_DEFAULT_TIER,
    queuePrefix: config.QUEUE_NAME_PREFIX,
  };
}

/** What every use case needs: the database, the rules, a logger and a clock (injectable for tests). */
export interface BillingDeps {
  db: BillingDatabase;
  settings: BillingSettings;
  logger: ComponentLogger;
  now: () => Date;
}
