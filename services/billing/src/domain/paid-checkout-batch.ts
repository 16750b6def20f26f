import type Stripe from "stripe";
import { metrics } from "@cgs/shared";
import {
  recordAndLockCheckouts,
  refundPendingEvents,
  topupIdOf,
  writeTopupCredits,
  type CheckoutTopup,
  type CreditedWallet,
} from "../data/payment-repository";
import type { BillingTransaction, LedgerLine } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { billingPeriodAt, type StorageTierName } from "./storage-tiers";
import {
  checkoutMatchesTopup,
  readPaidCheckout,
  topupDetails,
  topupReference,
  topupSettled,
  type PaidCheckout,
  type StripeEventOutcome,
} from "./stripe-events";

/** `per_event`: not the common case; the caller applies it alone with applyStripeEvent after the batch. */
export type BatchOutcome = StripeEventOutcome | "per_event";

/** The ledger did not take every credit the batch worked out: the batch is rolled back and applied event by event. */
export class BatchInDoubt extends Error {}

interface Credit {
  checkout: PaidCheckout & { checkoutSessionId: string };
  topup: CheckoutTopup;
  line: LedgerLine;
}

interface CreditPlan {
  credits: Credit[];
  outcomes: Map<string, BatchOutcome>;
}

/** The top-up a checkout pays for, chosen as lockTopupForCheckout chooses it; undefined when in doubt. */
function topupOf(checkout: PaidCheckout, topups: CheckoutTopup[]): CheckoutTopup | undefined {
  const byId = topupIdOf(checkout.topupId);
  const candidates = topups.filter(
    (t) => t.id === byId || t.checkoutSessionId === checkout.checkoutSessionId,
  );
  return candidates.find((t) => t.id === byId) ?? (candidates.length === 1 ? candidates[0] : undefined);
}

/**
 * Works out the batch's common case in memory, with the top-ups and wallets locked: a paid checkout that
 * matches its unpaid top-up, on an open wallet with no shortfall and no storage period to charge, is credited
 * (several on one wallet in arrival order, each line with its running balance). Anything else (review, closed
 * wallet, shortfall, storage due, a wallet to create, any doubt) is left to the per-event path.
 */
function planCredits(
  deps: BillingDeps,
  events: Stripe.Event[],
  topups: CheckoutTopup[],
  walletByAccount: Map<string, CreditedWallet>,
): CreditPlan {
  const outcomes = new Map<string, BatchOutcome>();
  const credits: Credit[] = [];
  const creditedTopups = new Set<string>();
  const references = new Set<string>();
  const storageDue = (wallet: CreditedWallet) => {
    const tier = deps.settings.storageTiers[wallet.storageTier as StorageTierName];
    return tier !== undefined && tier.pricePerPeriod > 0 && !wallet.storagePeriodPaid;
  };
  for (const event of events) {
    const checkout = readPaidCheckout(event);
    const { checkoutSessionId } = checkout;
    const topup = checkoutSessionId ? topupOf(checkout, topups) : undefined;
    if (!checkoutSessionId || !topup || !checkoutMatchesTopup(checkout, topup)) {
      outcomes.set(event.id, "per_event");
      continue;
    }
    if (topupSettled(topup) || creditedTopups.has(topup.id)) {
      outcomes.set(event.id, "already_credited");
      continue;
    }
    const wallet = walletByAccount.get(topup.accountId);
    const reference = topupReference(checkoutSessionId);
    if (
      !wallet ||
      wallet.status === "closed" ||
      wallet.shortfall > 0 ||
      storageDue(wallet) ||
      references.has(reference)
    ) {
      outcomes.set(event.id, "per_event");
      continue;
    }
    wallet.balance += topup.amount;
    creditedTopups.add(topup.id);
    references.add(reference);
    outcomes.set(event.id, "credited");
    credits.push({
      checkout: { ...checkout, checkoutSessionId },
      topup,
      line: {
        accountId: wallet.accountId,
        kind: "topup",
        reference,
        amount: topup.amount,
        currency: wallet.currency,
        balanceAfter: wallet.balance,
        details: topupDetails(checkoutSessionId, checkout.paymentIntentId, 0),
      },
    });
  }
  return { credits, outcomes };
}

/** Sums each wallet's lines, so every wallet is moved once. */
function walletMoves(lines: LedgerLine[]) {
  const byAccount = new Map<string, number>();
  for (const l of lines) byAccount.set(l.accountId, (byAccount.get(l.accountId) ?? 0) + l.amount);
  return [...byAccount].map(([accountId, balanceDelta]) => ({ accountId, balanceDelta }));
}

/**
 * One transaction for a batch of paid checkouts, in the lock order of the per-event path (event ids, top-ups,
 * wallets; top-ups and wallets each in id order): records the event ids (a redelivery is a duplicate here),
 * credits the common case and records each outcome in one statement. Events left `per_event` are not recorded.
 */
async function creditInTransaction(
  tx: BillingTransaction,
  deps: BillingDeps,
  events: Stripe.Event[],
): Promise<{ outcomes: Map<string, BatchOutcome>; credits: Credit[] }> {
  const checkouts = events.map(readPaidCheckout);
  const { recorded, topups, wallets } = await recordAndLockCheckouts(tx, {
    events: events.map((e) => ({ eventId: e.id, type: e.type })),
    topupIds: checkouts.flatMap((c) => topupIdOf(c.topupId) ?? []),
    checkoutSessionIds: checkouts.flatMap((c) => c.checkoutSessionId ?? []),
    periodStart: billingPeriodAt(deps.clock.now()).start,
  });
  const repeated = events.filter((e) => !recorded.has(e.id)).map((e) => e.id);
  // A closed wallet's refund left unfinished (billing stopped mid-way) is finished by the per-event path.
  const unfinished = await refundPendingEvents(tx, repeated);
  const outcomes = new Map<string, BatchOutcome>(
    repeated.map((id) => [id, unfinished.has(id) ? "per_event" : "duplicate_event"]),
  );
  const fresh = events.filter((e) => recorded.has(e.id));
  if (fresh.length === 0) return { outcomes, credits: [] };
  const plan = planCredits(deps, fresh, topups, new Map(wallets.map((w) => [w.accountId, w])));
  const lines = plan.credits.map((c) => c.line);
  const settled = [...plan.outcomes].filter(([, outcome]) => outcome !== "per_event");
  const inserted = await writeTopupCredits(tx, {
    lines,
    moves: walletMoves(lines),
    paid: plan.credits.map((c) => ({
      id: c.topup.id,
      checkoutSessionId: c.checkout.checkoutSessionId,
      paymentIntentId: c.checkout.paymentIntentId ?? null,
    })),
    paidAt: deps.clock.now(),
    outcomes: settled.map(([eventId, outcome]) => ({ eventId, outcome })),
    unrecorded: fresh.filter((e) => plan.outcomes.get(e.id) === "per_event").map((e) => e.id),
  });
  if (inserted !== lines.length) throw new BatchInDoubt("a top-up credit was already in the ledger");
  for (const [id, outcome] of plan.outcomes) outcomes.set(id, outcome);
  return { outcomes, credits: plan.credits };
}

/**
 * Applies a batch of paid-checkout events (distinct ids) in one transaction: redeliveries come back as
 * duplicates, the common case is credited set-based, and every other event is returned as `per_event` (not
 * recorded). Throws when the transaction fails (nothing of it is applied); the caller then applies the events
 * one by one.
 */
export async function creditPaidCheckouts(
  deps: BillingDeps,
  events: Stripe.Event[],
): Promise<Map<string, BatchOutcome>> {
  const { outcomes, credits } = await deps.db.transaction((tx) => creditInTransaction(tx, deps, events));
  for (const { topup, checkout, line } of credits) {
    metrics.credits.labels("in", line.currency).inc(line.amount);
    deps.logger.info(
      {
        accountId: topup.accountId,
        checkoutSessionId: checkout.checkoutSessionId,
        amount: line.amount,
        settled: 0,
      },
      "top-up credited",
    );
  }
  return outcomes;
}
