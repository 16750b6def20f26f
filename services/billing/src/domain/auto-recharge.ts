import { randomUUID } from "node:crypto";
import { AppError, clockTime, formatMoney } from "@cgs/shared";
import { NEEDS_ACTION_MESSAGE, type SavedCardPayments } from "../adapters/payment-provider";
import { findActiveCard, findCard } from "../data/card-repository";
import {
  claimDueRecharges,
  claimSilentRecharges,
  hasRechargeInFlight,
  insertRecharge,
  latestRecharge,
  lockTopup,
  rechargedSince,
  updateTopup,
  type TopupRow,
} from "../data/payment-repository";
import {
  lockWallet,
  updateWalletSettings,
  type BillingTransaction,
  type WalletRow,
  type WalletSettings,
} from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { periodEnd } from "./spend-limits";
import { lockOrCreateWallet, readWallet } from "./wallets";

/**
 * Auto-recharge: with a saved card, when a charge (a metered minute, a storage period) takes the balance under
 * the player's threshold, billing makes one off-session payment up to the recharge-to amount. The intent is
 * recorded in the charge's own transaction (never two in flight per wallet: a unique index), Stripe is called after
 * the commit (submitRecharges, with an idempotency key per recharge), and the credit lands only from the signed
 * payment_intent.succeeded webhook. Three failures in a row turn it off, saying why.
 */
export const MAX_RECHARGE_FAILURES = 3;
/** Stripe remembers an idempotency key for 24 h; a recharge it never answered is given up before that. */
const GIVE_UP_AFTER_MS = 23 * 3_600_000;
/** A claimed recharge is not handed to another submitter before this (the Stripe call takes seconds at most). */
const CLAIM_LEASE_MS = 60_000;

export const rechargeIdempotencyKey = (rechargeId: string) => `cgs-recharge-${rechargeId}`;
/** The ledger reference of a recharge's credit: one per recharge, whatever Stripe redelivers. */
export const rechargeReference = (rechargeId: string) => `recharge:${rechargeId}`;

export interface AutoRechargeDeps extends BillingDeps {
  payments: SavedCardPayments;
}

const monthStart = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));

/** After a charge: the balance went from at or above the threshold to under it, so one recharge is started. */
export async function rechargeIfCrossed(
  tx: BillingTransaction,
  deps: BillingDeps,
  wallet: WalletRow,
  balanceBefore: number,
): Promise<void> {
  const threshold = wallet.autoRechargeThreshold;
  if (!wallet.autoRechargeEnabled || threshold === null) return;
  if (balanceBefore >= threshold && wallet.balance < threshold) await startRecharge(tx, deps, wallet);
}

/**
 * Records the intent of one recharge of the locked wallet when it is on, has a card, is under its threshold, has
 * none in flight and the monthly limit allows it; otherwise records why it was skipped (the monthly limit). The
 * Stripe call is made after the commit by submitRecharges.
 */
export async function startRecharge(
  tx: BillingTransaction,
  deps: BillingDeps,
  wallet: WalletRow,
): Promise<void> {
  const { autoRechargeThreshold: threshold, autoRechargeTo: to, autoRechargeMonthlyLimit: monthly } = wallet;
  if (wallet.status === "closed" || !wallet.autoRechargeEnabled) return;
  if (threshold === null || to === null || monthly === null || wallet.balance >= threshold) return;
  const card = await findActiveCard(tx, wallet.accountId);
  if (!card || (await hasRechargeInFlight(tx, wallet.accountId))) return;
  const now = deps.clock.now();
  const amount = Math.min(to - wallet.balance, deps.settings.topupMax);
  const recharged = await rechargedSince(tx, wallet.accountId, monthStart(now));
  if (recharged + amount > monthly) {
    const currency = wallet.currency;
    await updateWalletSettings(tx, wallet, {
      autoRechargeSkipped:
        `Not recharged on ${now.toISOString().slice(0, 10)} at ${clockTime(now)}: ${formatMoney(amount, currency)} ` +
        `more would pass your monthly recharge limit of ${formatMoney(monthly, currency)} ` +
        `(${formatMoney(recharged, currency)} recharged this month). It allows recharges again on ` +
        `${periodEnd("month", now).toISOString().slice(0, 10)}, or raise it.`,
    });
    deps.logger.info({ accountId: wallet.accountId, amount, recharged, monthly }, "auto-recharge skipped");
    return;
  }
  const recharge = await insertRecharge(tx, {
    id: randomUUID(),
    accountId: wallet.accountId,
    amount,
    currency: wallet.currency,
    provider: "stripe",
    paymentMethodRef: card.id,
    nextAttemptAt: now,
    createdAt: now,
  });
  if (!recharge) return;
  if (wallet.autoRechargeSkipped) await updateWalletSettings(tx, wallet, { autoRechargeSkipped: null });
  deps.logger.info({ accountId: wallet.accountId, rechargeId: recharge.id, amount }, "auto-recharge started");
}

/**
 * A recharge that did not bring money: declined, needing the cardholder, or given up. Counted once per recharge
 * (only one still in flight changes); the third in a row turns auto-recharge off with the reason. The recharge
 * row must be locked (before the wallet, the lock order of every payment path). False when it was settled already.
 */
export async function recordRechargeFailure(
  tx: BillingTransaction,
  deps: BillingDeps,
  recharge: TopupRow,
  failure: { status: "failed" | "requires_action"; message: string; paymentIntentId?: string },
): Promise<boolean> {
  if (recharge.status !== "creating" && recharge.status !== "open") return false;
  await updateTopup(tx, recharge.id, {
    status: failure.status,
    failureMessage: failure.message,
    ...(failure.paymentIntentId ? { paymentIntentId: failure.paymentIntentId } : {}),
  });
  const wallet = await lockWallet(tx, recharge.accountId);
  if (!wallet) return true;
  const failures = wallet.autoRechargeFailures + 1;
  const changes: WalletSettings = { autoRechargeFailures: failures };
  if (failures >= MAX_RECHARGE_FAILURES && wallet.autoRechargeEnabled) {
    changes.autoRechargeEnabled = false;
    changes.autoRechargeOffReason =
      `Turned off after ${failures} failed recharges in a row; the last: "${failure.message}". ` +
      "Check or replace the card, then turn auto-recharge on again.";
  }
  await updateWalletSettings(tx, wallet, changes);
  deps.logger.warn(
    {
      accountId: recharge.accountId,
      rechargeId: recharge.id,
      failures,
      turnedOff: !!changes.autoRechargeOffReason,
    },
    "auto-recharge failed",
  );
  return true;
}

/**
 * Step two of every recharge: Stripe is called for each recorded intent, outside any transaction, with the
 * recharge's idempotency key, then its answer is recorded (step three). Claims make replicas and retries call
 * Stripe for a recharge one at a time; a failure to reach Stripe leaves the intent for the next pass. Returns how
 * many Stripe answered.
 */
export async function submitRecharges(deps: AutoRechargeDeps, limit = 50): Promise<number> {
  const now = deps.clock.now();
  const claimed = await claimDueRecharges(deps.db, now, new Date(now.getTime() + CLAIM_LEASE_MS), limit);
  let answered = 0;
  for (const recharge of claimed) {
    if (now.getTime() - recharge.createdAt.getTime() > GIVE_UP_AFTER_MS) {
      await deps.db.transaction(async (tx) => {
        const locked = await lockTopup(tx, recharge.id);
        if (locked?.status === "creating")
          await recordRechargeFailure(tx, deps, locked, {
            status: "failed",
            message: "The payment provider could not be reached for a day",
          });
      });
      continue;
    }
    const card = recharge.paymentMethodRef ? await findCard(deps.db, recharge.paymentMethodRef) : undefined;
    const wallet = await readWallet(deps, recharge.accountId);
    if (!card || !wallet.stripeCustomerId) {
      await deps.db.transaction(async (tx) => {
        const locked = await lockTopup(tx, recharge.id);
        if (locked?.status === "creating")
          await recordRechargeFailure(tx, deps, locked, {
            status: "failed",
            message: "No saved card to charge",
          });
      });
      continue;
    }
    let answer;
    try {
      answer = await deps.payments.chargeSavedCard({
        rechargeId: recharge.id,
        accountId: recharge.accountId,
        customerId: card.customerId,
        paymentMethodId: card.paymentMethodId,
        amount: recharge.amount,
        currency: recharge.currency,
        idempotencyKey: rechargeIdempotencyKey(recharge.id),
      });
    } catch (err) {
      deps.logger.warn({ err, rechargeId: recharge.id }, "auto-recharge not sent; it is tried again");
      continue;
    }
    answered += 1;
    await deps.db.transaction(async (tx) => {
      const locked = await lockTopup(tx, recharge.id);
      // The webhook may have settled it already (it can arrive before this answer is recorded).
      if (locked?.status !== "creating") return;
      if (answer.outcome === "submitted") {
        await updateTopup(tx, locked.id, { status: "open", paymentIntentId: answer.paymentIntentId });
      } else {
        await recordRechargeFailure(tx, deps, locked, {
          status: answer.outcome === "requires_action" ? "requires_action" : "failed",
          message: answer.message,
          paymentIntentId: answer.paymentIntentId,
        });
      }
    });
  }
  return answered;
}

/** How long after it was sent a recharge without an outcome is looked up at Stripe, and then how often. */
export const SILENT_RECHARGE_AFTER_MS = 60 * 60_000;

/**
 * Recharges whose payment_intent webhook never arrived keep the wallet's one in-flight slot. An hour after one was
 * sent, its PaymentIntent is read: failed at Stripe (a payment method it needs, canceled, the cardholder's action)
 * it is recorded as that failure, which frees the slot; succeeded or still processing it is left to Stripe's
 * webhook (redelivered for three days), since credit comes only from the signed event. Returns how many settled.
 */
export async function settleSilentRecharges(deps: AutoRechargeDeps, limit = 50): Promise<number> {
  const now = deps.clock.now();
  const silent = await claimSilentRecharges(
    deps.db,
    now,
    new Date(now.getTime() - SILENT_RECHARGE_AFTER_MS),
    new Date(now.getTime() + SILENT_RECHARGE_AFTER_MS),
    limit,
  );
  let settled = 0;
  for (const recharge of silent) {
    let intent;
    try {
      intent = await deps.payments.readPaymentIntent(recharge.paymentIntentId!);
    } catch (err) {
      deps.logger.warn(
        { err, rechargeId: recharge.id },
        "could not read a silent recharge's payment; tried again later",
      );
      continue;
    }
    const failed =
      intent.status === "requires_payment_method" || intent.status === "canceled"
        ? ("failed" as const)
        : intent.status === "requires_action" || intent.status === "requires_confirmation"
          ? ("requires_action" as const)
          : undefined;
    if (!failed) {
      deps.logger.warn(
        { rechargeId: recharge.id, paymentIntentId: recharge.paymentIntentId, status: intent.status },
        "a recharge's outcome has not arrived by webhook; left for Stripe's redelivery",
      );
      continue;
    }
    const recorded = await deps.db.transaction(async (tx) => {
      const locked = await lockTopup(tx, recharge.id);
      if (locked?.status !== "open") return false;
      return recordRechargeFailure(tx, deps, locked, {
        status: failed,
        message:
          failed === "requires_action"
            ? NEEDS_ACTION_MESSAGE
            : (intent.failureMessage ?? "The payment did not go through at the payment provider"),
      });
    });
    if (recorded) settled += 1;
  }
  return settled;
}

// ---------- the player's settings (GET and PATCH /api/v1/credits/auto-recharge) ----------

export type RechargeStatus = "pending" | "succeeded" | "failed" | "requires_action" | "refunded";

const RECHARGE_STATUS: Record<TopupRow["status"], RechargeStatus> = {
  creating: "pending",
  open: "pending",
  paid: "succeeded",
  failed: "failed",
  requires_action: "requires_action",
  refund_pending: "refunded",
  refunded_closed_wallet: "refunded",
};

/** The contract's AutoRecharge resource. */
export interface AutoRechargeView {
  enabled: boolean;
  threshold: number | null;
  rechargeTo: number | null;
  monthlyLimit: number | null;
  currency: string;
  rechargedThisMonth: number;
  monthResetsAt: string;
  failuresInARow: number;
  paymentMethod: { brand: string; last4: string; expMonth: number; expYear: number } | null;
  turnedOffReason: string | null;
  skippedReason: string | null;
  lastRecharge: {
    id: string;
    amount: number;
    status: RechargeStatus;
    message: string | null;
    paymentId: string | null;
    createdAt: string;
  } | null;
}

export async function getAutoRecharge(deps: BillingDeps, accountId: string): Promise<AutoRechargeView> {
  const wallet = await readWallet(deps, accountId);
  const now = deps.clock.now();
  const [card, last, recharged] = await Promise.all([
    findActiveCard(deps.db, accountId),
    latestRecharge(deps.db, accountId),
    rechargedSince(deps.db, accountId, monthStart(now)),
  ]);
  return {
    enabled: wallet.autoRechargeEnabled,
    threshold: wallet.autoRechargeThreshold,
    rechargeTo: wallet.autoRechargeTo,
    monthlyLimit: wallet.autoRechargeMonthlyLimit,
    currency: wallet.currency,
    rechargedThisMonth: recharged,
    monthResetsAt: periodEnd("month", now).toISOString(),
    failuresInARow: wallet.autoRechargeFailures,
    paymentMethod: card
      ? { brand: card.brand, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear }
      : null,
    turnedOffReason: wallet.autoRechargeOffReason,
    skippedReason: wallet.autoRechargeSkipped,
    lastRecharge: last
      ? {
          id: last.id,
          amount: last.amount,
          status: RECHARGE_STATUS[last.status],
          message: last.failureMessage,
          paymentId: last.paymentIntentId,
          createdAt: last.createdAt.toISOString(),
        }
      : null,
  };
}

export interface AutoRechargePatch {
  enabled?: boolean;
  threshold?: number;
  rechargeTo?: number;
  monthlyLimit?: number;
}

/** The settings after the patch must make sense together before they are saved; messages name the field. */
function assertUsable(deps: BillingDeps, wallet: WalletRow, next: Required<AutoRechargePatch>) {
  const { topupMin, topupMax } = deps.settings;
  const money = (n: number) => formatMoney(n, wallet.currency);
  if (next.rechargeTo - next.threshold < topupMin) {
    throw AppError.validation(
      "rechargeTo",
      `rechargeTo must be at least the threshold plus the smallest top-up (${money(next.threshold + topupMin)})`,
    );
  }
  if (next.rechargeTo > topupMax) {
    throw AppError.validation(
      "rechargeTo",
      `rechargeTo must not exceed the largest top-up (${money(topupMax)})`,
    );
  }
  if (next.monthlyLimit < next.rechargeTo) {
    throw AppError.validation(
      "monthlyLimit",
      `monthlyLimit must allow at least one recharge: at least rechargeTo (${money(next.rechargeTo)})`,
    );
  }
}

/**
 * PATCH: turning it on needs a saved card and a threshold, recharge-to amount and monthly limit that fit together;
 * it clears the count of failures and the reason it turned itself off. Turned on with the balance already under the
 * threshold, it recharges at once.
 */
export async function updateAutoRecharge(
  deps: BillingDeps,
  accountId: string,
  patch: AutoRechargePatch,
): Promise<AutoRechargeView> {
  await deps.db.transaction(async (tx) => {
    const wallet = await lockOrCreateWallet(tx, deps, accountId);
    const enabled = patch.enabled ?? wallet.autoRechargeEnabled;
    const threshold = patch.threshold ?? wallet.autoRechargeThreshold;
    const rechargeTo = patch.rechargeTo ?? wallet.autoRechargeTo;
    const monthlyLimit = patch.monthlyLimit ?? wallet.autoRechargeMonthlyLimit;
    if (enabled) {
      if (wallet.status === "closed") {
        throw new AppError("ACCOUNT_PENDING_DELETION", "The account is being deleted; auto-recharge is off");
      }
      for (const [field, value] of Object.entries({ threshold, rechargeTo, monthlyLimit })) {
        if (value === null) throw AppError.validation(field, `${field} is required to turn auto-recharge on`);
      }
      if (!(await findActiveCard(tx, accountId))) {
        throw AppError.validation(
          "enabled",
          "enabled needs a saved card: save one first (POST /api/v1/credits/payment-method)",
        );
      }
    }
    if (threshold !== null && rechargeTo !== null && monthlyLimit !== null) {
      assertUsable(deps, wallet, { enabled, threshold, rechargeTo, monthlyLimit });
    }
    const turningOn = enabled && !wallet.autoRechargeEnabled;
    await updateWalletSettings(tx, wallet, {
      autoRechargeEnabled: enabled,
      autoRechargeThreshold: threshold,
      autoRechargeTo: rechargeTo,
      autoRechargeMonthlyLimit: monthlyLimit,
      autoRechargeSkipped: null,
      ...(turningOn ? { autoRechargeFailures: 0, autoRechargeOffReason: null } : {}),
    });
    await startRecharge(tx, deps, wallet);
  });
  return getAutoRecharge(deps, accountId);
}

/** Turns auto-recharge off on the player's behalf (the card removed, a recharge disputed, the account purged). */
export async function turnOffAutoRecharge(
  tx: BillingTransaction,
  wallet: WalletRow,
  reason: string,
): Promise<void> {
  if (!wallet.autoRechargeEnabled) return;
  await updateWalletSettings(tx, wallet, { autoRechargeEnabled: false, autoRechargeOffReason: reason });
}
