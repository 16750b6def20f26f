import { randomUUID } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { AppError } from "@cgs/shared";
import { holdsTable } from "../data/billing-tables";
import { hasOpenDispute } from "../data/payment-repository";
import { adjustHeld, lockWallet, type BillingTransaction, type WalletRow } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import type { StorageTierName } from "./storage-tiers";
import { assertWalletOpen, lockOrCreateWallet, spendable } from "./wallets";

type Hold = typeof holdsTable.$inferSelect;

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
    const existing = (
      await tx.select().from(holdsTable).where(eq(holdsTable.sessionId, request.sessionId)).for("update")
    )[0];
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
    if (spendable(wallet) < holdAmount) {
      throw new AppError(
        "INSUFFICIENT_CREDITS",
        `The balance must cover ${deps.settings.holdMinutes} minutes (${holdAmount} ${wallet.currency} minor units) to start`,
      );
    }
    const id = randomUUID();
    await tx.insert(holdsTable).values({
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
  await tx
    .update(holdsTable)
    .set({ status: "released", remaining: 0, releasedAt: new Date() })
    .where(eq(holdsTable.id, hold.id));
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
  const found = (
    await deps.db
      .select({ accountId: holdsTable.accountId })
      .from(holdsTable)
      .where(eq(holdsTable.id, authorizationId))
  )[0];
  if (!found || found.accountId !== accountId) throw AppError.notFound("Start authorization not found");
  await deps.db.transaction(async (tx) => {
    const wallet = await lockWallet(tx, accountId);
    const hold = (
      await tx
        .select()
        .from(holdsTable)
        .where(and(eq(holdsTable.id, authorizationId), eq(holdsTable.status, "active")))
        .for("update")
    )[0];
    if (wallet && hold) await releaseHoldInTransaction(tx, wallet, hold);
  });
}
