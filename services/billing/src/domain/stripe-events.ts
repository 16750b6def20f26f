import { and, eq } from "drizzle-orm";
import type Stripe from "stripe";
import { stripeEventsTable, topupsTable } from "../data/billing-tables";
import { postLedgerEntry, type BillingTransaction } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { chargeStoragePeriod } from "./storage-billing";
import { billingPeriodAt } from "./storage-tiers";
import { lockOrCreateWallet } from "./wallets";

export type StripeEventOutcome =
  | "credited"
  | "already_credited"
  | "duplicate_event"
  | "unpaid"
  | "ignored_type"
  | "unattributable"
  | "currency_mismatch";

const CREDITING_TYPES = new Set(["checkout.session.completed", "checkout.session.async_payment_succeeded"]);
const CHECKOUT_TYPES = new Set([
  ...CREDITING_TYPES,
  "checkout.session.async_payment_failed",
  "checkout.session.expired",
]);

/** The fields of a Checkout Session this service relies on. */
interface CheckoutObject {
  id?: unknown;
  payment_status?: unknown;
  amount_total?: unknown;
  currency?: unknown;
  client_reference_id?: unknown;
  metadata?: { accountId?: unknown; topupId?: unknown } | null;
}

/**
 * Applies one verified Stripe event. A paid checkout session credits its amount once, keyed by the
 * checkout session id, whichever of `completed` (paid) and `async_payment_succeeded` arrives first and
 * however often either is redelivered. Other types are acknowledged and change nothing.
 */
export async function applyStripeEvent(deps: BillingDeps, event: Stripe.Event): Promise<StripeEventOutcome> {
  if (!CHECKOUT_TYPES.has(event.type)) return "ignored_type";
  return deps.db.transaction(async (tx) => {
    const seen = await tx
      .insert(stripeEventsTable)
      .values({ eventId: event.id, type: event.type, outcome: "pending" })
      .onConflictDoNothing()
      .returning({ eventId: stripeEventsTable.eventId });
    if (seen.length === 0) return "duplicate_event";
    const outcome = await applyCheckoutEvent(tx, deps, event);
    await tx.update(stripeEventsTable).set({ outcome }).where(eq(stripeEventsTable.eventId, event.id));
    return outcome;
  });
}

async function applyCheckoutEvent(
  tx: BillingTransaction,
  deps: BillingDeps,
  event: Stripe.Event,
): Promise<StripeEventOutcome> {
  if (!CREDITING_TYPES.has(event.type)) return "ignored_type";
  const session = event.data.object as CheckoutObject;
  if (event.type === "checkout.session.completed" && session.payment_status !== "paid") return "unpaid";
  const checkoutSessionId = typeof session.id === "string" ? session.id : undefined;
  const accountId =
    typeof session.client_reference_id === "string" && session.client_reference_id
      ? session.client_reference_id
      : typeof session.metadata?.accountId === "string"
        ? session.metadata.accountId
        : undefined;
  const amount = session.amount_total;
  if (
    !checkoutSessionId ||
    !accountId ||
    typeof amount !== "number" ||
    !Number.isInteger(amount) ||
    amount <= 0
  ) {
    deps.logger.error({ eventId: event.id, checkoutSessionId }, "paid checkout session cannot be attributed");
    return "unattributable";
  }
  const wallet = await lockOrCreateWallet(tx, deps, accountId);
  const currency = typeof session.currency === "string" ? session.currency.toUpperCase() : wallet.currency;
  if (currency !== wallet.currency) {
    deps.logger.error(
      { eventId: event.id, checkoutSessionId, currency },
      "paid checkout in a foreign currency",
    );
    return "currency_mismatch";
  }
  const posted = await postLedgerEntry(tx, wallet, {
    kind: "topup",
    reference: `topup:${checkoutSessionId}`,
    amount,
    details: { checkoutSessionId, stripeEventId: event.id, eventType: event.type },
  });
  if (!posted.applied) return "already_credited";
  await tx
    .update(topupsTable)
    .set({ status: "paid", paidAt: deps.now() })
    .where(and(eq(topupsTable.checkoutSessionId, checkoutSessionId), eq(topupsTable.accountId, accountId)));
  // Money arrived: an unpaid storage period can be settled now rather than at the next storage pass.
  await chargeStoragePeriod(tx, deps, wallet, billingPeriodAt(deps.now()));
  deps.logger.info({ accountId, checkoutSessionId, amount }, "top-up credited");
  return "credited";
}
