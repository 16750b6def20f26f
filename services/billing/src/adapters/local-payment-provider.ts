import { createHash, randomBytes } from "node:crypto";
import type { LocalWebhookSender } from "./local-webhook-sender";
import type {
  CheckoutRequest,
  CheckoutSession,
  PaymentIntentState,
  PaymentProvider,
  SavedCardDetails,
} from "./payment-provider";

const digest = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 24);

/** Stripe's test card that saves but declines every charge: the local page offers it to try failures. */
export const LOCAL_DECLINING_CARD = "0341";

/**
 * For `npm start` only: checkout sessions with distinct ids, paid (or a card saved) on the local stand-in page that
 * this service serves under /local-checkout/{id} (stripe-mock answers every call with the same fixture id). A
 * charge of a saved card answers like Stripe, then delivers the signed payment_intent webhook Stripe would send:
 * succeeded, or payment_failed for the declining test card.
 */
export function createLocalPaymentProvider(baseUrl: string, webhooks: LocalWebhookSender): PaymentProvider {
  /** The intents this process made, as Stripe would answer a read of them (a restart forgets them). */
  const intents = new Map<string, PaymentIntentState>();
  return {
    name: "local",
    createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession> {
      const id = `cs_local_${digest(request.idempotencyKey)}`;
      return Promise.resolve({ id, url: `${baseUrl}/local-checkout/${id}` });
    },
    // The local stand-in takes no real money, so there is nothing to send back.
    refundPayment: () => Promise.resolve(),
    createCustomer: (request) => Promise.resolve(`cus_local_${digest(request.accountId)}`),
    createCardSetup(request) {
      const id = `cs_local_setup_${digest(request.idempotencyKey)}`;
      return Promise.resolve({ id, url: `${baseUrl}/local-checkout/${id}` });
    },
    readSetupCard(setupIntentId): Promise<SavedCardDetails> {
      // The local page names the test card it saved in the setup intent's id: seti_local_<random>_<last4>.
      const match = /^seti_local_([0-9a-f]+)_(\d{4})$/.exec(setupIntentId);
      if (!match) return Promise.reject(new Error(`unknown local setup intent ${setupIntentId}`));
      return Promise.resolve({
        paymentMethodId: `pm_local_${match[1]}_${match[2]}`,
        brand: "visa",
        last4: match[2]!,
        expMonth: 12,
        expYear: new Date().getUTCFullYear() + 3,
      });
    },
    chargeSavedCard(request) {
      const paymentIntentId = `pi_local_${digest(request.idempotencyKey)}`;
      const declines = request.paymentMethodId.endsWith(`_${LOCAL_DECLINING_CARD}`);
      const intent = {
        id: paymentIntentId,
        object: "payment_intent",
        amount: request.amount,
        amount_received: declines ? 0 : request.amount,
        currency: request.currency.toLowerCase(),
        customer: request.customerId,
        payment_method: request.paymentMethodId,
        status: declines ? "requires_payment_method" : "succeeded",
        metadata: { rechargeId: request.rechargeId, accountId: request.accountId },
        latest_charge: `ch_local_${randomBytes(8).toString("hex")}`,
        last_payment_error: declines ? { code: "card_declined", message: "Your card was declined." } : null,
      };
      // After the answer, as Stripe's webhook follows its API answer; retried a few times, as Stripe retries.
      const type = declines ? "payment_intent.payment_failed" : "payment_intent.succeeded";
      const send = (attempt: number) =>
        webhooks.deliver(type, intent).catch(() => {
          if (attempt < 5) setTimeout(() => void send(attempt + 1), 1_000 * attempt);
        });
      setTimeout(() => void send(1), 200);
      intents.set(paymentIntentId, {
        status: intent.status,
        failureMessage: intent.last_payment_error?.message ?? null,
      });
      return Promise.resolve({ outcome: "submitted", paymentIntentId });
    },
    readPaymentIntent: (paymentIntentId) =>
      Promise.resolve(
        intents.get(paymentIntentId) ?? { status: "canceled", failureMessage: "No such payment" },
      ),
    detachCard: () => Promise.resolve(),
  };
}
