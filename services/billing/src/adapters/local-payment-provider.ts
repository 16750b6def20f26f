import { createHash } from "node:crypto";
import type { CheckoutRequest, CheckoutSession, PaymentProvider } from "./payment-provider";

/**
 * For `npm start` only: checkout sessions with distinct ids, paid on the local stand-in page that this
 * service serves under /local-checkout/{id} (stripe-mock answers every call with the same fixture id).
 */
export function createLocalPaymentProvider(baseUrl: string): PaymentProvider {
  return {
    name: "local",
    createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession> {
      const id = `cs_local_${createHash("sha256").update(request.idempotencyKey).digest("hex").slice(0, 24)}`;
      return Promise.resolve({ id, url: `${baseUrl}/local-checkout/${id}` });
    },
    // The local stand-in takes no real money, so there is nothing to send back.
    refundPayment: () => Promise.resolve(),
  };
}
