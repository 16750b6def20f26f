import { randomUUID } from "node:crypto";
import { AppError, type AccountsClient } from "@cgs/shared";
import {
  findLatestTopupOfCheckout,
  findTopup,
  findTopupByClientKey,
  insertTopupOnce,
  storeCheckout,
  type TopupRow,
} from "../data/payment-repository";
import type { PaymentProvider } from "../adapters/payment-provider";
import type { BillingDeps } from "./billing-deps";
import { assertWalletOpen, lockOrCreateWallet } from "./wallets";

export interface TopupDeps extends BillingDeps {
  payments: PaymentProvider;
  accounts: AccountsClient;
  /** Portal origin for the success and cancel pages. */
  portalBaseUrl: string;
}

export interface TopupRequest {
  accountId: string;
  accessToken: string;
  amount: number;
  /** The client's Idempotency-Key header. */
  clientKey?: string;
}

export interface TopupCheckout {
  checkoutUrl: string;
  checkoutSessionId: string;
}

export function checkoutReturnUrls(portalBaseUrl: string) {
  return {
    successUrl: `${portalBaseUrl}/account?topup=success&session_id={CHECKOUT_SESSION_ID}`,
    cancelUrl: `${portalBaseUrl}/account?topup=cancelled`,
  };
}

/** Amount bounds come from config; the message names the field. */
export function assertTopupAmount(deps: BillingDeps, amount: unknown): asserts amount is number {
  const { topupMin, topupMax } = deps.settings;
  if (typeof amount !== "number" || !Number.isInteger(amount)) {
    throw AppError.validation("amount", "amount must be an integer number of minor units");
  }
  if (amount < topupMin || amount > topupMax) {
    throw AppError.validation("amount", `amount must be between ${topupMin} and ${topupMax}`);
  }
}

/**
 * POST /credits/topup: refuse during the deletion grace, record the top-up, open a checkout session with
 * an idempotency key derived from the top-up, and hand back its URL. Nothing is credited here.
 */
export async function createTopup(deps: TopupDeps, request: TopupRequest): Promise<TopupCheckout> {
  assertTopupAmount(deps, request.amount);
  const account = await deps.accounts.getStatus(request.accessToken);
  if (account.pendingDeletion) {
    throw new AppError(
      "ACCOUNT_PENDING_DELETION",
      "The account is pending deletion; top-ups are not possible",
    );
  }
  const topup = await deps.db.transaction(async (tx) => {
    const wallet = await lockOrCreateWallet(tx, deps, request.accountId);
    assertWalletOpen(wallet, "a top-up");
    const values = {
      id: randomUUID(),
      accountId: request.accountId,
      amount: request.amount,
      currency: wallet.currency,
      clientKey: request.clientKey ?? null,
      provider: deps.payments.name,
    };
    const inserted = await insertTopupOnce(tx, values);
    if (inserted) return inserted;
    // Same Idempotency-Key again: the first top-up (the wallet lock serialises the two requests).
    const existing = (await findTopupByClientKey(tx, request.accountId, request.clientKey ?? ""))!;
    if (existing.amount !== request.amount) {
      throw AppError.validation("amount", "amount differs from the first request with this Idempotency-Key");
    }
    return existing;
  });
  if (topup.checkoutSessionId && topup.checkoutUrl) {
    return { checkoutUrl: topup.checkoutUrl, checkoutSessionId: topup.checkoutSessionId };
  }
  const session = await deps.payments.createCheckoutSession({
    topupId: topup.id,
    accountId: request.accountId,
    amount: topup.amount,
    currency: topup.currency,
    ...checkoutReturnUrls(deps.portalBaseUrl),
    idempotencyKey: `cgs-topup-${topup.id}`,
  });
  if (!(await storeCheckout(deps.db, topup.id, { id: session.id, url: session.url }))) {
    // A concurrent request with the same Idempotency-Key stored its checkout first: answer that one, so both
    // callers hold the same checkout whatever the provider does with its own idempotency key.
    const first = await findTopup(deps.db, topup.id);
    if (first?.checkoutSessionId && first.checkoutUrl) {
      return { checkoutUrl: first.checkoutUrl, checkoutSessionId: first.checkoutSessionId };
    }
  }
  deps.logger.info(
    { accountId: request.accountId, topupId: topup.id, amount: topup.amount },
    "top-up checkout created",
  );
  return { checkoutUrl: session.url, checkoutSessionId: session.id };
}

export async function findTopupByCheckoutSession(
  deps: BillingDeps,
  checkoutSessionId: string,
): Promise<TopupRow | undefined> {
  return findLatestTopupOfCheckout(deps.db, checkoutSessionId);
}
