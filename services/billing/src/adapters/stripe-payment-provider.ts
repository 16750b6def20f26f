import type Stripe from "stripe";
import { AppError } from "@cgs/shared";
import type { CheckoutRequest, CheckoutSession, PaymentProvider } from "./payment-provider";

/** Stripe Checkout in payment mode; the webhook (not the redirect) credits the wallet. */
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
        throw Object.assign(AppError.unavailable("The payment provider is unavailable, try again", 5), {
          cause: err,
        });
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
  };
}
