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

/** A Checkout Session in setup mode: the player saves a card for auto-recharge, nothing is charged. */
export interface CardSetupRequest {
  setupId: string;
  accountId: string;
  /** The Stripe Customer the card is saved to (off-session payments need one). */
  customerId: string;
  currency: string;
  successUrl: string;
  cancelUrl: string;
  idempotencyKey: string;
}

/** What the platform keeps of a saved card: enough to show it and to charge it, never its number. */
export interface SavedCardDetails {
  paymentMethodId: string;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/** One off-session payment on a saved card (an auto-recharge); its metadata comes back in the webhook. */
export interface OffSessionCharge {
  rechargeId: string;
  accountId: string;
  customerId: string;
  paymentMethodId: string;
  amount: number;
  currency: string;
  /** Same key, same PaymentIntent: a retry after a lost answer never charges twice. */
  idempotencyKey: string;
}

/**
 * The provider's synchronous answer. `submitted`: accepted, the outcome comes by webhook (succeeded, or failed
 * later); `requires_action`: the bank wants the cardholder to confirm; `declined`: refused now. A failure to
 * reach the provider is thrown instead (and the recharge is tried again with the same key).
 */
export type OffSessionResult =
  | { outcome: "submitted"; paymentIntentId: string }
  | { outcome: "requires_action" | "declined"; paymentIntentId: string | undefined; message: string };

/** What a player is told when their bank wants them to confirm an off-session payment. */
export const NEEDS_ACTION_MESSAGE =
  "Your bank asks you to confirm this payment; pay once by top-up or save the card again";

/** A PaymentIntent's status in Stripe's words, and why its last attempt failed (when it did). */
export interface PaymentIntentState {
  status: string;
  failureMessage: string | null;
}

/** Saved cards and the off-session payments made with them (auto-recharge). */
export interface SavedCardPayments {
  createCustomer(request: { accountId: string; idempotencyKey: string }): Promise<string>;
  createCardSetup(request: CardSetupRequest): Promise<CheckoutSession>;
  /** The card a completed setup saved (read from the provider, outside any database transaction). */
  readSetupCard(setupIntentId: string): Promise<SavedCardDetails>;
  chargeSavedCard(request: OffSessionCharge): Promise<OffSessionResult>;
  /** Where an off-session payment stands at the provider (a recharge whose webhook never came). */
  readPaymentIntent(paymentIntentId: string): Promise<PaymentIntentState>;
  /** Detaches the card from its customer; one already detached counts as done. */
  detachCard(paymentMethodId: string): Promise<void>;
}

/** Where top-ups are paid: Stripe Checkout in production, a local stand-in for `npm start`. */
export interface PaymentProvider extends PaymentRefunds, SavedCardPayments {
  readonly name: "stripe" | "local";
  createCheckoutSession(request: CheckoutRequest): Promise<CheckoutSession>;
}
