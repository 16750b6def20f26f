import type Stripe from "stripe";
import {
  closeDispute,
  insertDispute,
  lockDispute,
  lockRecharge,
  lockTopup,
  lockTopupByPaymentIntent,
  lockTopupForCheckout,
  recordPaymentReview,
  refundPendingTopups,
  recordStripeEvent,
  setStripeEventOutcome,
  stripeEventOutcome,
  updateTopup,
  type TopupRow,
} from "../data/payment-repository";
import { lockCardSetup } from "../data/card-repository";
import {
  postLedgerEntry,
  updateWalletSettings,
  type BillingTransaction,
  type WalletRow,
} from "../data/wallet-repository";
import type { LedgerKind } from "../data/billing-tables";
import type { PaymentRefunds, SavedCardDetails, SavedCardPayments } from "../adapters/payment-provider";
import { rechargeReference, recordRechargeFailure, turnOffAutoRecharge } from "./auto-recharge";
import type { BillingDeps } from "./billing-deps";
import { saveCard } from "./saved-cards";
import { chargeStoragePeriod } from "./storage-billing";
import { billingPeriodAt } from "./storage-tiers";
import { lockOrCreateWallet } from "./wallets";

export type StripeEventOutcome =
  | "credited"
  | "already_credited"
  | "duplicate_event"
  | "unpaid"
  | "ignored_type"
  | "needs_review"
  /** Recorded between the two transactions of a closed wallet's refund; a redelivery finishes it. */
  | "refund_pending"
  | "refunded_closed_wallet"
  | "refund_taken_back"
  | "already_refunded"
  | "dispute_opened"
  | "dispute_won"
  | "dispute_lost"
  | "already_closed"
  | "card_saved"
  | "card_discarded"
  | "card_already_saved"
  /** A payment_intent event of a payment that is not an auto-recharge (a Checkout top-up's own intent). */
  | "not_a_recharge"
  | "recharge_failed"
  | "recharge_needs_action"
  | "already_settled";

const CREDITING_TYPES = new Set(["checkout.session.completed", "checkout.session.async_payment_succeeded"]);

const RECHARGE_TYPES = new Set([
  "payment_intent.succeeded",
  "payment_intent.payment_failed",
  "payment_intent.requires_action",
]);

/** Every Stripe event type billing acts on; the README lists them for the webhook subscription. */
export const SUBSCRIBED_STRIPE_EVENTS = [
  ...CREDITING_TYPES,
  "checkout.session.async_payment_failed",
  "checkout.session.expired",
  "charge.refunded",
  "charge.dispute.created",
  "charge.dispute.closed",
  ...RECHARGE_TYPES,
] as const;
const HANDLED = new Set<string>(SUBSCRIBED_STRIPE_EVENTS);

/** The fields of a Checkout Session this service relies on. */
interface CheckoutObject {
  id?: unknown;
  mode?: unknown;
  setup_intent?: unknown;
  payment_status?: unknown;
  amount_total?: unknown;
  currency?: unknown;
  client_reference_id?: unknown;
  payment_intent?: unknown;
  metadata?: { accountId?: unknown; topupId?: unknown; cardSetupId?: unknown } | null;
}

/** The fields of a PaymentIntent (an auto-recharge's) this service relies on. */
interface PaymentIntentObject {
  id?: unknown;
  amount?: unknown;
  amount_received?: unknown;
  currency?: unknown;
  metadata?: { accountId?: unknown; rechargeId?: unknown } | null;
  last_payment_error?: { message?: unknown } | null;
}

interface ChargeObject {
  id?: unknown;
  payment_intent?: unknown;
  amount_refunded?: unknown;
}

interface DisputeObject {
  id?: unknown;
  payment_intent?: unknown;
  amount?: unknown;
  currency?: unknown;
  status?: unknown;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);
const int = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isInteger(v) ? v : undefined;
/** Stripe sends ids, or whole objects when expanded. */
const idOf = (v: unknown): string | undefined =>
  str(v) ?? (v && typeof v === "object" ? str((v as { id?: unknown }).id) : undefined);

/** What handling events needs of the payment provider: refunds, and reading the card a setup saved. */
export type WebhookPayments = PaymentRefunds & Pick<SavedCardPayments, "readSetupCard">;

interface EventContext {
  tx: BillingTransaction;
  deps: BillingDeps;
  event: Stripe.Event;
  payments: WebhookPayments | undefined;
  /** A completed card setup: the card, read from Stripe before the transaction. */
  card?: SavedCardDetails;
}

/** A completed Checkout Session in setup mode: a card to save for auto-recharge, no payment. */
const isCardSetup = (event: Stripe.Event) =>
  event.type === "checkout.session.completed" && (event.data.object as CheckoutObject).mode === "setup";

/** The card a completed setup saved, asked of Stripe before the event's transaction (never inside one). */
async function readSetupCard(
  event: Stripe.Event,
  payments: WebhookPayments | undefined,
): Promise<SavedCardDetails | undefined> {
  const setupIntentId = idOf((event.data.object as CheckoutObject).setup_intent);
  if (!setupIntentId) return undefined;
  if (!payments) throw new Error("a card setup needs the payment provider to read the card");
  return payments.readSetupCard(setupIntentId);
}

/**
 * Applies one verified Stripe event once (its id is recorded in the same transaction): a checkout that
 * matches a top-up the platform created credits it (settling any shortfall first); refunds and lost
 * disputes take the credit back; an open dispute blocks starts. Other types are acknowledged. A payment to a
 * closed wallet is refunded through Stripe after that transaction, never inside it (see refundToClosedWallet).
 */
export async function applyStripeEvent(
  deps: BillingDeps,
  event: Stripe.Event,
  payments?: WebhookPayments,
): Promise<StripeEventOutcome> {
  if (!HANDLED.has(event.type)) return "ignored_type";
  // Most redeliveries arrive long after the first; the insert below still decides a concurrent pair.
  const seen = await stripeEventOutcome(deps.db, event.id);
  if (seen === "refund_pending") return finishClosedWalletRefund(deps, event, payments);
  if (seen !== undefined) return "duplicate_event";
  const card = isCardSetup(event) ? await readSetupCard(event, payments) : undefined;
  const outcome = await deps.db.transaction(async (tx) => {
    if (!(await recordStripeEvent(tx, event.id, event.type))) return "duplicate_event";
    const ctx: EventContext = { tx, deps, event, payments, card };
    const outcome = await dispatch(ctx);
    await setStripeEventOutcome(tx, event.id, outcome);
    return outcome;
  });
  return outcome === "refund_pending" ? finishClosedWalletRefund(deps, event, payments) : outcome;
}

function dispatch(ctx: EventContext): Promise<StripeEventOutcome> {
  const { type } = ctx.event;
  if (isCardSetup(ctx.event)) return applyCardSetup(ctx);
  if (CREDITING_TYPES.has(type)) return applyPaidCheckout(ctx);
  if (RECHARGE_TYPES.has(type)) return applyRechargeEvent(ctx);
  if (type === "charge.refunded") return applyRefund(ctx);
  if (type === "charge.dispute.created") return applyDisputeOpened(ctx);
  if (type === "charge.dispute.closed") return applyDisputeClosed(ctx);
  return Promise.resolve("ignored_type");
}

async function review(ctx: EventContext, reason: string, fields: Record<string, unknown>) {
  ctx.deps.logger.error({ stripeEventId: ctx.event.id, reason, ...fields }, "stripe payment held for review");
  await recordPaymentReview(ctx.tx, {
    stripeEventId: ctx.event.id,
    reason,
    checkoutSessionId: str(fields.checkoutSessionId),
    accountId: str(fields.accountId),
    amount: int(fields.amount),
    currency: str(fields.currency),
  });
  return "needs_review" as const;
}

/** What a paid checkout says about the payment, read the one way both the per-event and the batch path read it. */
export interface PaidCheckout {
  checkoutSessionId: string | undefined;
  accountId: string | undefined;
  amount: number | undefined;
  currency: string | undefined;
  paymentIntentId: string | undefined;
  topupId: string | undefined;
}

export function readPaidCheckout(event: Stripe.Event): PaidCheckout {
  const session = event.data.object as CheckoutObject;
  return {
    checkoutSessionId: str(session.id),
    accountId: str(session.client_reference_id) ?? str(session.metadata?.accountId),
    amount: int(session.amount_total),
    currency: str(session.currency)?.toUpperCase(),
    paymentIntentId: idOf(session.payment_intent),
    topupId: str(session.metadata?.topupId),
  };
}

/** A checkout event that credits its top-up: completed and paid, or an async payment that succeeded. */
export function isPaidCheckout(event: Stripe.Event): boolean {
  if (!CREDITING_TYPES.has(event.type)) return false;
  return (
    event.type !== "checkout.session.completed" ||
    (event.data.object as CheckoutObject).payment_status === "paid"
  );
}

/** The top-up agrees with the checkout on account, amount and currency (else the payment is held for review). */
export function checkoutMatchesTopup(
  checkout: PaidCheckout,
  topup: Pick<TopupRow, "accountId" | "amount" | "currency">,
): boolean {
  return (
    topup.accountId === checkout.accountId &&
    topup.amount === checkout.amount &&
    topup.currency === checkout.currency
  );
}

/** Paid, or refunded because the wallet was closed: either way this top-up is settled and credits nothing more. */
export const topupSettled = (topup: Pick<TopupRow, "status">): boolean =>
  topup.status === "paid" || topup.status === "refunded_closed_wallet";

/** The credit is keyed by the checkout session: duplicates, both event types and any order credit once. */
export const topupReference = (checkoutSessionId: string) => `topup:${checkoutSessionId}`;

export const topupDetails = (
  checkoutSessionId: string,
  paymentIntentId: string | undefined,
  settled: number,
) => ({
  checkoutSessionId,
  paymentId: paymentIntentId ?? checkoutSessionId,
  shortfallSettled: settled,
});

/** Credited only when account, amount and currency agree with a top-up this service created. */
async function applyPaidCheckout(ctx: EventContext): Promise<StripeEventOutcome> {
  const { tx, deps, event } = ctx;
  if (!isPaidCheckout(event)) return "unpaid";
  const checkout = readPaidCheckout(event);
  const { checkoutSessionId, accountId, amount, currency, paymentIntentId } = checkout;
  const fields = { checkoutSessionId, accountId, amount, currency };
  if (!checkoutSessionId) return review(ctx, "checkout without an id", fields);
  const topup = await lockTopupForCheckout(tx, { topupId: checkout.topupId, checkoutSessionId });
  if (!topup) return review(ctx, "no top-up was created for this checkout", fields);
  if (!checkoutMatchesTopup(checkout, topup)) {
    return review(ctx, "checkout does not match its top-up (account, amount or currency)", fields);
  }
  if (topupSettled(topup)) return "already_credited";
  const wallet = await lockOrCreateWallet(tx, deps, topup.accountId);
  if (wallet.status === "closed") return refundToClosedWallet(ctx, topup, paymentIntentId);
  const settled = Math.min(topup.amount, wallet.shortfall);
  const posted = await postLedgerEntry(tx, wallet, {
    kind: "topup",
    reference: topupReference(checkoutSessionId),
    amount: topup.amount,
    shortfallDelta: -settled,
    details: topupDetails(checkoutSessionId, paymentIntentId, settled),
  });
  if (!posted.applied) return "already_credited";
  await updateTopup(tx, topup.id, {
    status: "paid",
    paidAt: deps.clock.now(),
    checkoutSessionId,
    paymentIntentId: paymentIntentId ?? null,
  });
  // Money arrived: an unpaid storage period can be settled now rather than at the next storage pass.
  await chargeStoragePeriod(tx, deps, wallet, billingPeriodAt(deps.clock.now()));
  deps.logger.info({ accountId: topup.accountId, checkoutSessionId, amount, settled }, "top-up credited");
  return "credited";
}

/** Same key, same refund: Stripe answers a repeat with the refund it already made. */
export const closedWalletRefundKey = (topupId: string) => `cgs-closed-wallet-${topupId}`;

/**
 * A payment that reaches a closed wallet goes back through Stripe in three steps, so no lock is held across the
 * network call: here (in the event's transaction) the intent is recorded (top-up and event `refund_pending`);
 * after the commit finishClosedWalletRefund calls Stripe, then records the outcome. A crash or a failed call in
 * between leaves the intent, and Stripe's redelivery of the event finishes it with the same idempotency key.
 */
async function refundToClosedWallet(
  ctx: EventContext,
  topup: TopupRow,
  paymentIntentId: string | undefined,
): Promise<StripeEventOutcome> {
  if (!ctx.payments) throw new Error("a payment for a closed wallet needs the payment provider to refund it");
  if (!paymentIntentId) return review(ctx, "payment for a closed wallet without a payment intent", topup);
  await updateTopup(ctx.tx, topup.id, { status: "refund_pending", paymentIntentId });
  return "refund_pending";
}

/** The top-up (a checkout's, or an auto-recharge for payment_intent events) a paying event is about, locked. */
function lockTopupOfEvent(tx: BillingTransaction, event: Stripe.Event): Promise<TopupRow | undefined> {
  if (RECHARGE_TYPES.has(event.type)) {
    const intent = event.data.object as PaymentIntentObject;
    return lockRecharge(tx, {
      rechargeId: str(intent.metadata?.rechargeId),
      paymentIntentId: str(intent.id),
    });
  }
  const { topupId, checkoutSessionId } = readPaidCheckout(event);
  if (!checkoutSessionId) throw new Error(`refund-pending event ${event.id} names no checkout`);
  return lockTopupForCheckout(tx, { topupId, checkoutSessionId });
}

/** Steps two and three of a closed wallet's refund: Stripe, outside any transaction, then the outcome. */
async function finishClosedWalletRefund(
  deps: BillingDeps,
  event: Stripe.Event,
  payments: PaymentRefunds | undefined,
): Promise<StripeEventOutcome> {
  if (!payments) throw new Error("a payment for a closed wallet needs the payment provider to refund it");
  const pending = await deps.db.transaction((tx) => lockTopupOfEvent(tx, event));
  if (!pending?.paymentIntentId) throw new Error(`refund-pending event ${event.id} has no top-up to refund`);
  if (pending.status === "refund_pending") {
    await payments.refundPayment({
      paymentIntentId: pending.paymentIntentId,
      idempotencyKey: closedWalletRefundKey(pending.id),
    });
  }
  await deps.db.transaction(async (tx) => {
    const topup = await lockTopupOfEvent(tx, event);
    if (topup?.status === "refund_pending")
      await updateTopup(tx, topup.id, { status: "refunded_closed_wallet" });
    await setStripeEventOutcome(tx, event.id, "refunded_closed_wallet");
  });
  deps.logger.warn(
    { accountId: pending.accountId, topupId: pending.id },
    "payment to a closed wallet refunded",
  );
  return "refunded_closed_wallet";
}

/**
 * The backstop for closed wallets' refunds: one recorded as pending whose finishing step never ran (billing stopped,
 * or Stripe failed, and Stripe gave up redelivering the event after its three days) is finished here with the same
 * idempotency key. Running beside a redelivery is harmless: Stripe answers both calls with the one refund, and
 * the top-up moves to refunded once. Returns how many were finished.
 */
export async function finishPendingRefunds(
  deps: BillingDeps,
  payments: PaymentRefunds,
  limit = 50,
): Promise<number> {
  let finished = 0;
  for (const pending of await refundPendingTopups(deps.db, limit)) {
    if (!pending.paymentIntentId) continue;
    try {
      await payments.refundPayment({
        paymentIntentId: pending.paymentIntentId,
        idempotencyKey: closedWalletRefundKey(pending.id),
      });
    } catch (err) {
      deps.logger.warn(
        { err, topupId: pending.id },
        "closed wallet's refund failed again; the next pass retries",
      );
      continue;
    }
    const moved = await deps.db.transaction(async (tx) => {
      const topup = await lockTopup(tx, pending.id);
      if (topup?.status !== "refund_pending") return false;
      await updateTopup(tx, topup.id, { status: "refunded_closed_wallet" });
      return true;
    });
    if (moved) {
      finished += 1;
      deps.logger.warn(
        { accountId: pending.accountId, topupId: pending.id },
        "payment to a closed wallet refunded",
      );
    }
  }
  return finished;
}

/**
 * Takes credit back: from what the wallet can spend (never a running session's hold), the rest becomes
 * shortfall. The ledger records the whole amount, so ledger sum = balance - shortfall.
 */
async function takeBack(
  tx: BillingTransaction,
  wallet: WalletRow,
  kind: LedgerKind,
  reference: string,
  amount: number,
  details: Record<string, unknown>,
) {
  const taken = Math.min(amount, Math.max(0, wallet.balance - wallet.held));
  return postLedgerEntry(tx, wallet, {
    kind,
    reference,
    amount: -amount,
    shortfallDelta: amount - taken,
    details: { ...details, shortfall: amount - taken },
  });
}

/** charge.refunded carries the cumulative refunded amount: only the part not yet taken back is taken. */
async function applyRefund(ctx: EventContext): Promise<StripeEventOutcome> {
  const { tx, deps, event } = ctx;
  const charge = event.data.object as ChargeObject;
  const paymentIntentId = idOf(charge.payment_intent);
  const refunded = int(charge.amount_refunded);
  const fields = { chargeId: str(charge.id), paymentIntentId, amount: refunded };
  const topup = paymentIntentId ? await lockTopupByPaymentIntent(tx, paymentIntentId) : undefined;
  if (!topup || refunded === undefined) return review(ctx, "refund of a payment no top-up knows", fields);
  if (topup.status !== "paid") return "already_refunded";
  const target = Math.min(refunded, topup.amount);
  const due = target - topup.refundedAmount;
  if (due <= 0) return "already_refunded";
  const wallet = await lockOrCreateWallet(tx, deps, topup.accountId);
  await takeBack(tx, wallet, "refund", `refund:${paymentIntentId}:${target}`, due, {
    paymentId: str(charge.id) ?? paymentIntentId,
    checkoutSessionId: topup.checkoutSessionId,
  });
  await updateTopup(tx, topup.id, { refundedAmount: target });
  deps.logger.info({ accountId: topup.accountId, paymentIntentId, due }, "refund taken back");
  return "refund_taken_back";
}

interface RecordedDispute {
  disputeId: string;
  amount: number;
  status: unknown;
  topup: TopupRow;
}

/**
 * The dispute and the paid top-up it is about, recorded as open unless it already is (on `closed` the
 * `created` event may have been missed, so the dispute is recorded then and closed either way).
 */
async function recordDispute(ctx: EventContext): Promise<RecordedDispute | "needs_review"> {
  const dispute = ctx.event.data.object as DisputeObject;
  const disputeId = str(dispute.id);
  const paymentIntentId = idOf(dispute.payment_intent);
  const amount = int(dispute.amount);
  const topup = paymentIntentId ? await lockTopupByPaymentIntent(ctx.tx, paymentIntentId) : undefined;
  if (!disputeId || !paymentIntentId || amount === undefined || !topup || topup.status !== "paid") {
    return review(ctx, "dispute of a payment no paid top-up knows", { disputeId, paymentIntentId, amount });
  }
  await insertDispute(ctx.tx, {
    disputeId,
    accountId: topup.accountId,
    paymentIntentId,
    amount,
    currency: topup.currency,
    status: "open",
  });
  return { disputeId, amount, status: dispute.status, topup };
}

async function applyDisputeOpened(ctx: EventContext): Promise<StripeEventOutcome> {
  const recorded = await recordDispute(ctx);
  if (recorded === "needs_review") return recorded;
  const { topup, disputeId } = recorded;
  // A disputed automatic payment: the card is not charged again without the player turning it back on.
  if (topup.origin === "auto_recharge") {
    const wallet = await lockOrCreateWallet(ctx.tx, ctx.deps, topup.accountId);
    await turnOffAutoRecharge(ctx.tx, wallet, "Turned off because a recharge was disputed.");
  }
  ctx.deps.logger.warn({ accountId: topup.accountId, disputeId }, "dispute opened: new starts blocked");
  return "dispute_opened";
}

/** A lost dispute takes back what the dispute covers (not what refunds already took); a won one unblocks. */
async function applyDisputeClosed(ctx: EventContext): Promise<StripeEventOutcome> {
  const { tx, deps } = ctx;
  const recorded = await recordDispute(ctx);
  if (recorded === "needs_review") return recorded;
  const { disputeId, amount, topup } = recorded;
  const existing = await lockDispute(tx, disputeId);
  if (existing?.status !== "open") return "already_closed";
  const lost = recorded.status === "lost";
  await closeDispute(tx, disputeId, lost ? "lost" : "won", deps.clock.now());
  if (!lost) return "dispute_won";
  const due = Math.min(amount, topup.amount - topup.refundedAmount);
  if (due > 0) {
    const wallet = await lockOrCreateWallet(tx, deps, topup.accountId);
    await takeBack(tx, wallet, "dispute_lost", `dispute:${disputeId}`, due, {
      paymentId: disputeId,
      checkoutSessionId: topup.checkoutSessionId,
    });
    await updateTopup(tx, topup.id, { refundedAmount: topup.refundedAmount + due });
  }
  deps.logger.warn({ accountId: topup.accountId, disputeId, due }, "dispute lost: credit taken back");
  return "dispute_lost";
}

// ---------- saved cards and auto-recharges ----------

/** A setup-mode checkout completed: the card is saved if the platform opened this setup for this account. */
async function applyCardSetup(ctx: EventContext): Promise<StripeEventOutcome> {
  const checkout = ctx.event.data.object as CheckoutObject;
  const checkoutSessionId = str(checkout.id);
  const accountId = str(checkout.client_reference_id) ?? str(checkout.metadata?.accountId);
  const fields = { checkoutSessionId, accountId };
  if (!checkoutSessionId || !ctx.card) return review(ctx, "card setup without a checkout or a card", fields);
  const setup = await lockCardSetup(ctx.tx, {
    setupId: str(checkout.metadata?.cardSetupId),
    checkoutSessionId,
  });
  if (!setup || setup.accountId !== accountId) {
    return review(ctx, "no card setup was opened for this checkout and account", fields);
  }
  if (setup.status === "complete") return "card_already_saved";
  return saveCard(ctx.tx, ctx.deps, setup, ctx.card);
}

/**
 * payment_intent events of auto-recharges. `succeeded` is the only way a recharge credits: once (a ledger reference
 * per recharge, the recharge row locked), whatever state the recharge was recorded in (a payment the bank first
 * wanted confirmed may succeed later). `payment_failed` and `requires_action` record a failure, counted once.
 * Intents that are not recharges (a Checkout top-up's own) change nothing.
 */
async function applyRechargeEvent(ctx: EventContext): Promise<StripeEventOutcome> {
  const { tx, deps, event } = ctx;
  const intent = event.data.object as PaymentIntentObject;
  const paymentIntentId = str(intent.id);
  const recharge = await lockRecharge(tx, {
    rechargeId: str(intent.metadata?.rechargeId),
    paymentIntentId,
  });
  if (!recharge) return "not_a_recharge";
  if (event.type === "payment_intent.payment_failed" || event.type === "payment_intent.requires_action") {
    const needsAction = event.type === "payment_intent.requires_action";
    const lastError = str(intent.last_payment_error?.message);
    const counted = await recordRechargeFailure(tx, deps, recharge, {
      status: needsAction ? "requires_action" : "failed",
      message: needsAction
        ? "Your bank asks you to confirm this payment; pay once by top-up or save the card again"
        : (lastError ?? "The payment failed"),
      paymentIntentId,
    });
    if (!counted) return "already_settled";
    return needsAction ? "recharge_needs_action" : "recharge_failed";
  }
  const amount = int(intent.amount_received) ?? int(intent.amount);
  const currency = str(intent.currency)?.toUpperCase();
  const accountId = str(intent.metadata?.accountId);
  const fields = { paymentIntentId, accountId, amount, currency };
  if (
    (accountId && accountId !== recharge.accountId) ||
    amount !== recharge.amount ||
    currency !== recharge.currency
  ) {
    return review(ctx, "payment intent does not match its recharge (account, amount or currency)", fields);
  }
  if (topupSettled(recharge) || recharge.status === "refund_pending") return "already_credited";
  const wallet = await lockOrCreateWallet(tx, deps, recharge.accountId);
  if (wallet.status === "closed") return refundToClosedWallet(ctx, recharge, paymentIntentId);
  const settled = Math.min(recharge.amount, wallet.shortfall);
  const posted = await postLedgerEntry(tx, wallet, {
    kind: "topup",
    reference: rechargeReference(recharge.id),
    amount: recharge.amount,
    shortfallDelta: -settled,
    details: {
      paymentId: paymentIntentId,
      autoRecharge: true,
      rechargeId: recharge.id,
      shortfallSettled: settled,
    },
  });
  if (!posted.applied) return "already_credited";
  await updateTopup(tx, recharge.id, {
    status: "paid",
    paidAt: deps.clock.now(),
    paymentIntentId: paymentIntentId ?? null,
  });
  await updateWalletSettings(tx, wallet, { autoRechargeFailures: 0 });
  await chargeStoragePeriod(tx, deps, wallet, billingPeriodAt(deps.clock.now()));
  deps.logger.info(
    { accountId: recharge.accountId, rechargeId: recharge.id, amount, settled },
    "recharge credited",
  );
  return "credited";
}
