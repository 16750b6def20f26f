export interface CheckoutRequest {
  topupId: string;
  /** The account's identityUserId; Stripe carries it back as client_reference_id. */
  accountId: string;
  amount: number;
  currency: string;
  successUrl: string;
  cancelUrl: string;
  /** Same key, same checkout session: a retried request never opens a second one. */
  idempotencyKey: string;
}

export interface CheckoutSession {
  id: string;
  url: string;
}

export interface RefundRequest {
  paymentIntentId: string;
  /** Same key, same refund: a redelivered event never refunds twice. */
  idempotencyKey: string;
}

/** Sends a payment back in full (a payment that reached a closed wallet). */
export interface PaymentRefunds {
  refundPayment(request: RefundRequest): Promise<void>;
}

/** Where top-ups are paid: Stripe Checkout in production, a local stand-in for `npm start`. */
export interface PaymentProvider extends PaymentRefunds {
  readonly name: "stripe" | "local";
  createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession>;
}
