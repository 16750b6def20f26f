import { randomUUID } from "node:crypto";
import type Stripe from "stripe";
import type { BillingDeps } from "../domain/billing-deps";
import { applyStripeEvent } from "../domain/stripe-events";

export interface CheckoutEventOptions {
  eventId?: string;
  type?: string;
  checkoutSessionId?: string;
  accountId: string;
  amount: number;
  currency?: string;
  paymentStatus?: "paid" | "unpaid" | "no_payment_required";
}

/** A Stripe event as Stripe sends it for a Checkout Session (only the fields billing reads are filled). */
export function checkoutEvent(options: CheckoutEventOptions): Stripe.Event {
  return {
    id: options.eventId ?? `evt_${randomUUID().replace(/-/g, "")}`,
    object: "event",
    api_version: "2025-08-27.basil",
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type: options.type ?? "checkout.session.completed",
    data: {
      object: {
        id: options.checkoutSessionId ?? `cs_test_${randomUUID().replace(/-/g, "")}`,
        object: "checkout.session",
        mode: "payment",
        payment_status: options.paymentStatus ?? "paid",
        amount_total: options.amount,
        currency: (options.currency ?? "usd").toLowerCase(),
        client_reference_id: options.accountId,
        metadata: { accountId: options.accountId },
      },
    },
  } as unknown as Stripe.Event;
}

/** Credits a wallet through the real top-up path (a paid checkout event), as the webhook would. */
export async function creditWallet(deps: BillingDeps, accountId: string, amount: number): Promise<void> {
  const outcome = await applyStripeEvent(deps, checkoutEvent({ accountId, amount }));
  if (outcome !== "credited") throw new Error(`could not credit ${accountId}: ${outcome}`);
}
