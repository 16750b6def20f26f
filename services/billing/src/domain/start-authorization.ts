import { randomUUID } from "node:crypto";
import { AppError } from "@cgs/shared";
import {
  findHoldOwner,
  insertHold,
  lockActiveHoldById,
  lockHoldOfSession,
  markHoldReleased,
  type Hold,
} from "../data/hold-repository";
import { hasOpenDispute } from "../data/payment-repository";
import { adjustHeld, lockWallet, type BillingTransaction, type WalletRow } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { assertStartWithinLimits } from "./spend-limits";
import type { StorageTierName } from "./storage-tiers";
import { assertWalletOpen, lockOrCreateWallet, spendable } from "./wallets";

export interface StartAuthorizationRequest {
  sessionId: string;
  ratePerMinute: number;
  currency: string;
}

export interface StartAuthorization {
  authorizationId: string;
  holdAmount: number;
  storage: { tier: string; sizeGb: number };
}

/**
 * Sessions asks before it launches an instance: the spendable balance must cover the minimum minutes at
 * the session's rate, and that much is held in the same transaction, so two starts cannot both spend it.
 * Asking again for the same session returns the same authorization.
 */
export async function authorizeStart(
  deps: BillingDeps,
  accountId: string,
  request: StartAuthorizationRequest,
): Promise<StartAuthorization> {
  return deps.db.transaction(async (tx) => {
    const wallet = await lockOrCreateWallet(tx, deps, accountId);
    assertWalletOpen(wallet, "starting a session");
    if (request.currency !== wallet.currency) {
      throw AppError.validation("currency", `currency must be the wallet currency ${wallet.currency}`);
    }
    const holdAmount = deps.settings.holdMinutes * request.ratePerMinute;
    const tier = deps.settings.storageTiers[wallet.storageTier as StorageTierName];
    const storage = { tier: wallet.storageTier, sizeGb: tier?.sizeGb ?? 0 };
    const existing = await lockHoldOfSession(tx, request.sessionId);
    if (existing && existing.accountId !== accountId) {
      throw AppError.validation("sessionId", "sessionId belongs to another account");
    }
    if (existing?.status === "active") {
      return { authorizationId: existing.id, holdAmount: existing.amount, storage };
    }
    if (existing) {
      throw AppError.validation(
        "sessionId",
        "sessionId was already authorized and released; use a new session id",
      );
    }
    if (wallet.shortfall > 0) {
      throw new AppError(
        "INSUFFICIENT_CREDITS",
        `A refunded or disputed payment left ${wallet.shortfall} ${wallet.currency} minor units unpaid; top up to settle it before starting`,
      );
    }
    if (await hasOpenDispute(tx, accountId)) {
      throw new AppError(
        "INSUFFICIENT_CREDITS",
        "A payment of this account is disputed; new sessions can start once the dispute is closed",
      );
    }
    assertStartWithinLimits(wallet, holdAmount, deps.settings.holdMinutes, deps.clock.now());
    if (spendable(wallet) < holdAmount) {
      throw new AppError(
        "INSUFFICIENT_CREDITS",
        `The balance must cover ${deps.settings.holdMinutes} minutes (${holdAmount} ${wallet.currency} minor units) to start`,
      );
    }
    const id = randomUUID();
    await insertHold(tx, {
      id,
      accountId,
      sessionId: request.sessionId,
      amount: holdAmount,
      remaining: holdAmount,
      ratePerMinute: request.ratePerMinute,
      currency: request.currency,
    });
    await adjustHeld(tx, wallet, holdAmount);
    return { authorizationId: id, holdAmount, storage };
  });
}

/** Gives the rest of a hold back to the spendable balance; the wallet and hold must be locked. */
export async function releaseHoldInTransaction(
  tx: BillingTransaction,
  wallet: WalletRow,
  hold: Hold,
): Promise<void> {
  if (hold.status !== "active") return;
  await markHoldReleased(tx, hold.id, new Date());
  await adjustHeld(tx, wallet, -hold.remaining);
  hold.status = "released";
  hold.remaining = 0;
}

/** The release endpoint: idempotent; only the account that placed the hold can release it. */
export async function releaseStartAuthorization(
  deps: BillingDeps,
  accountId: string,
  authorizationId: string,
): Promise<void> {
  if ((await findHoldOwner(deps.db, authorizationId)) !== accountId)
    throw AppError.notFound("Start authorization not found");
  await deps.db.transaction(async (tx) => {
    const wallet = await lockWallet(tx, accountId);
    const hold = await lockActiveHoldById(tx, authorizationId);
    if (wallet && hold) await releaseHoldInTransaction(tx, wallet, hold);
  });
}
