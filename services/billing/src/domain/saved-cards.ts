import { randomUUID } from "node:crypto";
import { AppError, type AccountsClient } from "@cgs/shared";
import type { SavedCardDetails, SavedCardPayments } from "../adapters/payment-provider";
import {
  completeCardSetup,
  insertCard,
  insertCardSetup,
  listDetachingCards,
  markCardDetached,
  retireActiveCard,
  storeCardSetupCheckout,
  type CardSetupRow,
  type SavedCardRow,
} from "../data/card-repository";
import {
  storeCustomerIfMissing,
  updateWalletSettings,
  type BillingTransaction,
} from "../data/wallet-repository";
import { startRecharge, turnOffAutoRecharge } from "./auto-recharge";
import type { BillingDeps } from "./billing-deps";
import { assertWalletOpen, lockOrCreateWallet } from "./wallets";

/**
 * The card auto-recharge charges: saved through a Stripe Checkout Session in setup mode (nothing is charged), shown as
 * brand, last four digits and expiry, removable. Only a setup the platform opened saves a card, from the signed
 * checkout.session.completed webhook; Stripe is called outside every database transaction.
 */
export interface CardDeps extends BillingDeps {
  payments: SavedCardPayments;
  accounts: AccountsClient;
  portalBaseUrl: string;
}

export interface CardSetupCheckout {
  checkoutUrl: string;
  checkoutSessionId: string;
}

export function cardSetupReturnUrls(portalBaseUrl: string) {
  return {
    successUrl: `${portalBaseUrl}/billing?card=saved`,
    cancelUrl: `${portalBaseUrl}/billing?card=cancelled`,
  };
}

/** POST /credits/payment-method: a setup-mode checkout for the account's Stripe Customer (created the first time). */
export async function createCardSetup(
  deps: CardDeps,
  request: { accountId: string; accessToken: string },
): Promise<CardSetupCheckout> {
  const account = await deps.accounts.getStatus(request.accessToken);
  if (account.pendingDeletion) {
    throw new AppError("ACCOUNT_PENDING_DELETION", "The account is pending deletion; no card can be saved");
  }
  const id = randomUUID();
  const wallet = await deps.db.transaction(async (tx) => {
    const locked = await lockOrCreateWallet(tx, deps, request.accountId);
    assertWalletOpen(locked, "saving a card");
    await insertCardSetup(tx, { id, accountId: request.accountId, createdAt: deps.clock.now() });
    return locked;
  });
  const customerId =
    wallet.stripeCustomerId ??
    (await storeCustomerIfMissing(
      deps.db,
      request.accountId,
      await deps.payments.createCustomer({
        accountId: request.accountId,
        idempotencyKey: `cgs-customer-${request.accountId}`,
      }),
    ));
  const session = await deps.payments.createCardSetup({
    setupId: id,
    accountId: request.accountId,
    customerId,
    currency: wallet.currency,
    ...cardSetupReturnUrls(deps.portalBaseUrl),
    idempotencyKey: `cgs-card-setup-${id}`,
  });
  await storeCardSetupCheckout(deps.db, id, session);
  deps.logger.info({ accountId: request.accountId, setupId: id }, "card setup checkout created");
  return { checkoutUrl: session.url, checkoutSessionId: session.id };
}

/**
 * The setup completed (the webhook's transaction, the setup row locked): the card becomes the account's one active
 * card, the one it replaces is detached after the commit. A new card starts the count of failures again, and if
 * auto-recharge is on with the balance under its threshold, it recharges now. A closed wallet keeps no card.
 */
export async function saveCard(
  tx: BillingTransaction,
  deps: BillingDeps,
  setup: CardSetupRow,
  card: SavedCardDetails,
): Promise<"card_saved" | "card_discarded"> {
  const now = deps.clock.now();
  const wallet = await lockOrCreateWallet(tx, deps, setup.accountId);
  await completeCardSetup(tx, setup.id, now);
  if (!wallet.stripeCustomerId)
    throw new Error(`card setup ${setup.id} completed for a wallet without a customer`);
  const open = wallet.status === "open";
  if (open) await retireActiveCard(tx, setup.accountId, now);
  await insertCard(tx, {
    id: randomUUID(),
    accountId: setup.accountId,
    customerId: wallet.stripeCustomerId,
    ...card,
    status: open ? "active" : "detaching",
    createdAt: now,
    removedAt: open ? null : now,
  });
  if (!open) return "card_discarded";
  await updateWalletSettings(tx, wallet, { autoRechargeFailures: 0 });
  await startRecharge(tx, deps, wallet);
  deps.logger.info({ accountId: setup.accountId, brand: card.brand, last4: card.last4 }, "card saved");
  return "card_saved";
}

/** DELETE /credits/payment-method: the card is no longer used (auto-recharge turns off), then Stripe detaches it. */
export async function removeCard(deps: BillingDeps & { payments: SavedCardPayments }, accountId: string) {
  const removed = await deps.db.transaction(async (tx) => {
    const wallet = await lockOrCreateWallet(tx, deps, accountId);
    const card = await retireActiveCard(tx, accountId, deps.clock.now());
    if (card) await turnOffAutoRecharge(tx, wallet, "Turned off because the saved card was removed.");
    return card;
  });
  if (!removed) throw AppError.notFound("No card is saved");
  await detachCard(deps, removed).catch((err: unknown) =>
    deps.logger.warn({ err, accountId }, "card not detached yet; the auto-recharge pass tries again"),
  );
}

async function detachCard(deps: BillingDeps & { payments: SavedCardPayments }, card: SavedCardRow) {
  await deps.payments.detachCard(card.paymentMethodId);
  await markCardDetached(deps.db, card.id);
}

/** Cards taken out of use are detached from Stripe's customer (after the transaction that decided it). */
export async function detachRetiredCards(
  deps: BillingDeps & { payments: SavedCardPayments },
  limit = 50,
): Promise<number> {
  let detached = 0;
  for (const card of await listDetachingCards(deps.db, limit)) {
    await detachCard(deps, card);
    detached += 1;
  }
  return detached;
}
