import { AppError } from "@cgs/shared";
import {
  createWalletIfMissing,
  lockWallet,
  type BillingTransaction,
  type WalletRow,
} from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { chargeStoragePeriod } from "./storage-billing";
import { billingPeriodAt } from "./storage-tiers";

/**
 * Creates the account's wallet on first contact (a no-op afterwards) without locking an existing one.
 * A new wallet's storage period is looked at at once, so the storage resource is right from the first read.
 */
export async function ensureWalletCreated(
  tx: BillingTransaction,
  deps: BillingDeps,
  accountId: string,
): Promise<void> {
  const created = await createWalletIfMissing(tx, {
    accountId,
    currency: deps.settings.currency,
    storageTier: deps.settings.defaultStorageTier,
  });
  if (!created) return;
  const wallet = await lockWallet(tx, accountId);
  if (wallet) await chargeStoragePeriod(tx, deps, wallet, billingPeriodAt(deps.clock.now()));
}

/** Locks the account's wallet for the rest of the transaction, creating it on first contact. */
export async function lockOrCreateWallet(
  tx: BillingTransaction,
  deps: BillingDeps,
  accountId: string,
): Promise<WalletRow> {
  await ensureWalletCreated(tx, deps, accountId);
  const wallet = await lockWallet(tx, accountId);
  if (!wallet) throw new Error(`wallet ${accountId} vanished`);
  return wallet;
}

/** Reads the wallet (creating it on first contact) without holding a lock past the transaction. */
export function readWallet(deps: BillingDeps, accountId: string): Promise<WalletRow> {
  return deps.db.transaction((tx) => lockOrCreateWallet(tx, deps, accountId));
}

export function assertWalletOpen(wallet: WalletRow, action: string): void {
  if (wallet.status === "closed") {
    throw new AppError("ACCOUNT_PENDING_DELETION", `The account is being deleted; ${action} is not possible`);
  }
}

/** Money the account can commit now: the balance minus what start authorizations hold. */
export function spendable(wallet: WalletRow): number {
  return wallet.balance - wallet.held;
}

export interface CreditBalance {
  balance: number;
  currency: string;
  minutesRemaining: number;
  ratePerMinute: number;
  storage: { tier: string; sizeGb: number; usedGb: number };
}

/** GET /credits/me: balance, the minutes it covers at the configured rate, and storage usage. */
export async function getCreditBalance(deps: BillingDeps, accountId: string): Promise<CreditBalance> {
  const wallet = await readWallet(deps, accountId);
  const rate = deps.settings.ratePerMinute;
  const tier = deps.settings.storageTiers[wallet.storageTier as keyof typeof deps.settings.storageTiers];
  return {
    balance: wallet.balance,
    currency: wallet.currency,
    minutesRemaining: Math.floor(wallet.balance / rate),
    ratePerMinute: rate,
    // Billing knows the provisioned size; the space used on the volume is not reported to billing yet.
    storage: { tier: wallet.storageTier, sizeGb: tier?.sizeGb ?? 0, usedGb: 0 },
  };
}
