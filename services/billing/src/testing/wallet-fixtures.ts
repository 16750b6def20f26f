import { randomUUID } from "node:crypto";
import StripeClient from "stripe";
import type Stripe from "stripe";
import { createEvent, type AnyEvent } from "@cgs/shared";
import { TEST_WEBHOOK_SECRET } from "./billing-harness";
import type { BillingDeps } from "../domain/billing-deps";
import { insertTopup } from "../data/payment-repository";
import { applyStripeEvent } from "../domain/stripe-events";

export interface CheckoutEventOptions {
  eventId?: string;
  type?: string;
  checkoutSessionId?: string;
  accountId: string;
  amount: number;
  currency?: string;
  paymentStatus?: "paid" | "unpaid" | "no_payment_required";
  topupId?: string;
  paymentIntentId?: string;
}

/** A Stripe event envelope around `object`, as Stripe sends it (only the fields billing reads are filled). */
export function stripeEvent(type: string, object: Record<string, unknown>, eventId?: string): Stripe.Event {
  return {
    id: eventId ?? `evt_${randomUUID().replace(/-/g, "")}`,
    object: "event",
    api_version: "2025-08-27.basil",
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  } as unknown as Stripe.Event;
}

/** A Stripe event for a Checkout Session. */
export function checkoutEvent(options: CheckoutEventOptions): Stripe.Event {
  return stripeEvent(
    options.type ?? "checkout.session.completed",
    {
      id: options.checkoutSessionId ?? `cs_test_${randomUUID().replace(/-/g, "")}`,
      object: "checkout.session",
      mode: "payment",
      payment_status: options.paymentStatus ?? "paid",
      amount_total: options.amount,
      currency: (options.currency ?? "usd").toLowerCase(),
      client_reference_id: options.accountId,
      payment_intent: options.paymentIntentId ?? null,
      metadata: { accountId: options.accountId, ...(options.topupId ? { topupId: options.topupId } : {}) },
    },
    options.eventId,
  );
}

export interface PlacedTopup {
  topupId: string;
  checkoutSessionId: string;
  paymentIntentId: string;
  /** The paid checkout event Stripe would send for it. */
  paid: Stripe.Event;
}

/** A top-up as POST /credits/topup records it (checkout opened), with the event that pays it. */
export async function placeTopup(
  deps: BillingDeps,
  accountId: string,
  amount: number,
  currency = deps.settings.currency,
): Promise<PlacedTopup> {
  const hex = () => randomUUID().replace(/-/g, "");
  const topupId = randomUUID();
  const checkoutSessionId = `cs_test_${hex()}`;
  const paymentIntentId = `pi_${hex()}`;
  await insertTopup(deps.db, {
    id: topupId,
    accountId,
    amount,
    currency,
    provider: "stripe",
    checkoutSessionId,
    status: "open",
  });
  const paid = checkoutEvent({ accountId, amount, currency, checkoutSessionId, topupId, paymentIntentId });
  return { topupId, checkoutSessionId, paymentIntentId, paid };
}

/** Credits a wallet through the real top-up path (a created top-up, then its paid checkout event). */
export async function creditWallet(
  deps: BillingDeps,
  accountId: string,
  amount: number,
): Promise<PlacedTopup> {
  const topup = await placeTopup(deps, accountId, amount);
  const outcome = await applyStripeEvent(deps, topup.paid);
  if (outcome !== "credited") throw new Error(`could not credit ${accountId}: ${outcome}`);
  return topup;
}

export const WEBHOOK_PATH = "/api/v1/billing/stripe-webhook";
const signer = new StripeClient("sk_test_billing");

/** Posts `event` to the webhook at `baseUrl` (billing or the gateway), signed with the test secret as Stripe signs. */
export async function postSignedEvent(
  baseUrl: string,
  event: Stripe.Event,
): Promise<{ status: number; body: unknown }> {
  const payload = JSON.stringify(event);
  const res = await fetch(`${baseUrl}${WEBHOOK_PATH}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "stripe-signature": signer.webhooks.generateTestHeaderString({ payload, secret: TEST_WEBHOOK_SECRET }),
    },
    body: payload,
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
}

/** session.started as the sessions service publishes it when the account's instance reaches running. */
export function sessionStarted(
  accountId: string,
  session: { sessionId: string; ratePerMinute: number; startedAt: Date; currency?: string },
): AnyEvent {
  return createEvent("session.started", accountId, {
    sessionId: session.sessionId,
    instanceId: "i-1",
    ratePerMinute: session.ratePerMinute,
    currency: session.currency ?? "USD",
    startedAt: session.startedAt.toISOString(),
  });
}
