import type Stripe from "stripe";
import { AppError } from "@cgs/shared";
import {
  NEEDS_ACTION_MESSAGE,
  type CheckoutRequest,
  type CheckoutSession,
  type OffSessionResult,
  type PaymentProvider,
  type SavedCardDetails,
} from "./payment-provider";

const unavailable = (err: unknown) =>
  Object.assign(AppError.unavailable("The payment provider is unavailable, try again", 5), { cause: err });

interface StripeErrorLike {
  type?: unknown;
  code?: unknown;
  message?: unknown;
  payment_intent?: { id?: unknown } | null;
}

/** A refusal the same request would meet again (a decline, a card no longer usable); anything else is retried. */
function offSessionRefusal(err: unknown): OffSessionResult | undefined {
  const e = err as StripeErrorLike;
  const paymentIntentId = typeof e.payment_intent?.id === "string" ? e.payment_intent.id : undefined;
  const message = typeof e.message === "string" && e.message ? e.message : "The payment was declined";
  if (e.type === "StripeCardError") {
    return e.code === "authentication_required"
      ? { outcome: "requires_action", paymentIntentId, message: NEEDS_ACTION_MESSAGE }
      : { outcome: "declined", paymentIntentId, message };
  }
  // 400: the card or customer is no longer usable (detached, deleted); retrying cannot help.
  if (e.type === "StripeInvalidRequestError") return { outcome: "declined", paymentIntentId, message };
  return undefined;
}

/** Stripe Checkout for top-ups and card setup, off-session PaymentIntents for auto-recharge; webhooks credit. */
export function createStripePaymentProvider(stripe: Stripe): PaymentProvider {
  return {
    name: "stripe",
    async createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession> {
      let session: Stripe.Checkout.Session;
      try {
        session = await stripe.checkout.sessions.create(
          {
            mode: "payment",
            client_reference_id: request.accountId,
            line_items: [
              {
                quantity: 1,
                price_data: {
                  currency: request.currency.toLowerCase(),
                  unit_amount: request.amount,
                  product_data: { name: "Cloud gaming credits" },
                },
              },
            ],
            success_url: request.successUrl,
            cancel_url: request.cancelUrl,
            metadata: { topupId: request.topupId, accountId: request.accountId },
          },
          { idempotencyKey: request.idempotencyKey },
        );
      } catch (err) {
        throw unavailable(err);
      }
      if (!session.url) throw AppError.unavailable("The payment provider returned no checkout page", 5);
      return { id: session.id, url: session.url };
    },
    async refundPayment(request) {
      try {
        await stripe.refunds.create(
          { payment_intent: request.paymentIntentId, reason: "requested_by_customer" },
          { idempotencyKey: request.idempotencyKey },
        );
      } catch (err) {
        // A retry after Stripe forgot the idempotency key (24 h) finds the payment refunded: that is the goal.
        if ((err as { code?: unknown }).code === "charge_already_refunded") return;
        throw err;
      }
    },
    async createCustomer(request) {
      try {
        const customer = await stripe.customers.create(
          { metadata: { accountId: request.accountId } },
          { idempotencyKey: request.idempotencyKey },
        );
        return customer.id;
      } catch (err) {
        throw unavailable(err);
      }
    },
    async createCardSetup(request) {
      let session: Stripe.Checkout.Session;
      try {
        session = await stripe.checkout.sessions.create(
          {
            mode: "setup",
            customer: request.customerId,
            currency: request.currency.toLowerCase(),
            payment_method_types: ["card"],
            client_reference_id: request.accountId,
            success_url: request.successUrl,
            cancel_url: request.cancelUrl,
            metadata: { cardSetupId: request.setupId, accountId: request.accountId },
            setup_intent_data: { metadata: { cardSetupId: request.setupId, accountId: request.accountId } },
          },
          { idempotencyKey: request.idempotencyKey },
        );
      } catch (err) {
        throw unavailable(err);
      }
      if (!session.url) throw AppError.unavailable("The payment provider returned no checkout page", 5);
      return { id: session.id, url: session.url };
    },
    async readSetupCard(setupIntentId): Promise<SavedCardDetails> {
      const intent = await stripe.setupIntents.retrieve(setupIntentId, { expand: ["payment_method"] });
      const method = intent.payment_method;
      if (!method || typeof method === "string" || !method.card) {
        throw new Error(`setup intent ${setupIntentId} saved no card`);
      }
      return {
        paymentMethodId: method.id,
        brand: method.card.brand,
        last4: method.card.last4,
        expMonth: method.card.exp_month,
        expYear: method.card.exp_year,
      };
    },
    async chargeSavedCard(request): Promise<OffSessionResult> {
      try {
        const intent = await stripe.paymentIntents.create(
          {
            amount: request.amount,
            currency: request.currency.toLowerCase(),
            customer: request.customerId,
            payment_method: request.paymentMethodId,
            payment_method_types: ["card"],
            off_session: true,
            confirm: true,
            description: "Cloud gaming credits (auto-recharge)",
            metadata: { rechargeId: request.rechargeId, accountId: request.accountId },
          },
          { idempotencyKey: request.idempotencyKey },
        );
        if (intent.status === "requires_action") {
          return { outcome: "requires_action", paymentIntentId: intent.id, message: NEEDS_ACTION_MESSAGE };
        }
        return { outcome: "submitted", paymentIntentId: intent.id };
      } catch (err) {
        const refusal = offSessionRefusal(err);
        if (refusal) return refusal;
        throw err;
      }
    },
    async readPaymentIntent(paymentIntentId) {
      const intent = await stripe.paymentIntents.retrieve(paymentIntentId);
      return { status: intent.status, failureMessage: intent.last_payment_error?.message ?? null };
    },
    async detachCard(paymentMethodId) {
      try {
        await stripe.paymentMethods.detach(paymentMethodId);
      } catch (err) {
        // Already detached (a retry, or removed in Stripe's dashboard): the goal is reached.
        if ((err as StripeErrorLike).type === "StripeInvalidRequestError") return;
        throw err;
      }
    },
  };
}
