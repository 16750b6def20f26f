import {
  listWalletsWithUnpaidPeriod,
  recordedPeriodStatus,
  saveStoragePeriod,
} from "../data/storage-period-repository";
import {
  lockWallet,
  postLedgerEntry,
  type BillingTransaction,
  type WalletRow,
} from "../data/wallet-repository";
import { rechargeIfCrossed } from "./auto-recharge";
import type { BillingDeps } from "./billing-deps";
import { spendPeriodsAt } from "./spend-limits";
import { billingPeriodAt, type BillingPeriod, type StorageTierName } from "./storage-tiers";

export type StoragePeriodStatus = "paid" | "unpaid" | "none";

/**
 * Takes the period's storage charge from the wallet once (ledger reference per account and period).
 * A period the wallet cannot cover is recorded as unpaid and retried later, never forced negative.
 */
export async function chargeStoragePeriod(
  tx: BillingTransaction,
  deps: BillingDeps,
  wallet: WalletRow,
  period: BillingPeriod,
): Promise<StoragePeriodStatus> {
  const tier = deps.settings.storageTiers[wallet.storageTier as StorageTierName];
  if (!tier || tier.pricePerPeriod === 0 || wallet.status === "closed") return "none";
  if ((await recordedPeriodStatus(tx, wallet.accountId, period.start)) === "paid") return "paid";
  const price = tier.pricePerPeriod;
  const now = deps.clock.now();
  let status: "paid" | "unpaid" = "unpaid";
  if (wallet.balance - wallet.held >= price) {
    const balanceBefore = wallet.balance;
    // Storage counts toward spending limits, but a limit never leaves the volume unpaid: limits stop play.
    const posted = await postLedgerEntry(tx, wallet, {
      kind: "storage",
      reference: `storage:${wallet.accountId}:${period.key}`,
      amount: -price,
      spending: spendPeriodsAt(now),
      details: { tier: tier.tier, sizeGb: tier.sizeGb, periodStart: period.start.toISOString() },
    });
    status = posted.applied || posted.reason === "duplicate" ? "paid" : "unpaid";
    if (posted.applied) await rechargeIfCrossed(tx, deps, wallet, balanceBefore);
  }
  await saveStoragePeriod(tx, {
    accountId: wallet.accountId,
    periodStart: period.start,
    periodEnd: period.end,
    tier: tier.tier,
    amount: price,
    status,
    paidAt: status === "paid" ? now : null,
    updatedAt: now,
  });
  if (status === "unpaid") {
    deps.logger.info({ accountId: wallet.accountId, period: period.key }, "storage period left unpaid");
  }
  return status;
}

/**
 * One pass of the storage worker: every open wallet on a paid tier whose current period is not paid yet
 * gets a charge attempt. Wallets are locked one at a time; replicas skip wallets another holds.
 */
export async function chargeStoragePeriods(deps: BillingDeps): Promise<{ paid: number; unpaid: number }> {
  const period = billingPeriodAt(deps.clock.now());
  const paidTiers = Object.values(deps.settings.storageTiers)
    .filter((t) => t.pricePerPeriod > 0)
    .map((t) => t.tier);
  const result = { paid: 0, unpaid: 0 };
  if (paidTiers.length === 0) return result;
  let after = "";
  for (;;) {
    const batch = await listWalletsWithUnpaidPeriod(deps.db, period.start, after, 500);
    if (batch.length === 0) return result;
    for (const { accountId } of batch) {
      const status = await deps.db.transaction(async (tx) => {
        const wallet = await lockWallet(tx, accountId);
        return wallet ? chargeStoragePeriod(tx, deps, wallet, period) : "none";
      });
      if (status === "paid") result.paid += 1;
      if (status === "unpaid") result.unpaid += 1;
    }
    after = batch[batch.length - 1]!.accountId;
  }
}

export interface StorageBilling {
  tier: string;
  sizeGb: number;
  pricePerPeriod: number;
  currency: string;
  period: { start: string; end: string };
  status: StoragePeriodStatus;
}

/** GET /billing/storage: the tier, its price and whether the current period is paid. */
export async function getStorageBilling(
  deps: BillingDeps,
  wallet: WalletRow,
  at: Date = deps.clock.now(),
): Promise<StorageBilling> {
  const period = billingPeriodAt(at);
  const tier =
    deps.settings.storageTiers[wallet.storageTier as StorageTierName] ?? deps.settings.storageTiers.none;
  let status: StoragePeriodStatus = "none";
  if (tier.pricePerPeriod > 0) {
    status =
      (await recordedPeriodStatus(deps.db, wallet.accountId, period.start)) === "paid" ? "paid" : "unpaid";
  }
  return {
    tier: tier.tier,
    sizeGb: tier.sizeGb,
    pricePerPeriod: tier.pricePerPeriod,
    currency: wallet.currency,
    period: { start: period.start.toISOString(), end: period.end.toISOString() },
    status,
  };
}
