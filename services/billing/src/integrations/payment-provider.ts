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

/** Where top-ups are paid: Stripe Checkout in production, a local stand-in for `npm start`. */
export interface PaymentProvider {
  readonly name: "stripe" | "local";
  createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession>;
}
